// DocumentReader: reads the documents of data files in input order, in chunks of about
// chunk_bytes, so that parsing and encoding can run on several threads (parse_chunk) while
// the order stays that of the input. A JSONL file is streamed line by line; a text file is
// one document and is read whole.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/sources/document.h"
#include "data/sources/jsonl_record.h"

namespace xtrain::util {
class InputFile;
}

namespace xtrain::data {

struct DocumentInput {
  enum class Kind { TextFile, JsonlFile, Texts };
  Kind kind = Kind::TextFile;
  std::string name;                // the path, or what Texts are ("builtin:demo")
  std::vector<std::string> texts;  // Texts: the documents themselves
};

struct RawChunk {
  std::string name;               // the file, for messages
  int64_t first_line = 0;         // JSONL: the line number of items[0]; 0: items are whole documents
  std::vector<std::string> items;  // JSONL lines, or whole text documents
  uint64_t bytes = 0;
};

class DocumentReader {
 public:
  explicit DocumentReader(std::vector<DocumentInput> inputs, size_t chunk_bytes = 1 << 20);
  ~DocumentReader();

  // The next chunk, or nullopt after the last. An unreadable or empty file, or a JSONL file
  // without a record, is an InputError naming it.
  std::optional<RawChunk> next();
  // Bytes of all inputs, known up front (for progress and ETA).
  uint64_t total_bytes() const { return total_bytes_; }

 private:
  std::optional<RawChunk> next_jsonl_lines();

  std::vector<DocumentInput> inputs_;
  size_t chunk_bytes_;
  uint64_t total_bytes_ = 0;
  size_t input_ = 0;   // the input being read
  size_t text_ = 0;    // Texts: the next document of inputs_[input_]
  std::unique_ptr<util::InputFile> file_;  // the open JSONL file
  std::string pending_;                     // bytes read past the last complete line
  int64_t line_ = 0;                        // lines of the open file handed out so far
  bool has_record_ = false;                 // whether the open file had a non-blank line
};

// The documents of a chunk, in order. JSONL records must be of the form `form`; problems are
// InputErrors naming the file and line.
std::vector<Document> parse_chunk(const RawChunk& chunk, RecordForm form);

}  // namespace xtrain::data
