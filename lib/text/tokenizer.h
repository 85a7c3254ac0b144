// Tokenizer: text <-> token ids. make_tokenizer() turns a recipe's `data.tokenizer` value
// into an instance; an unknown spec or an unreadable or malformed file is an InputError.
// encode() takes one document and adds no BOS/EOS: the data pipeline appends eos_id() after
// each document. Implementations are safe to call from several threads.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace xtrain::text {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::vector<int64_t> encode(std::string_view text) const = 0;
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
  // Number of distinct ids the tokenizer can produce; the model's vocab must be at least this.
  virtual int64_t vocab_size() const = 0;
  // Id appended after every document to separate documents in a token stream.
  virtual int64_t eos_id() const = 0;
  virtual std::string name() const = 0;
  // The id of a special token such as [MASK] or [CLS], when the tokenizer has one of that text.
  virtual std::optional<int64_t> token_id(std::string_view /*token*/) const { return std::nullopt; }
};

// Specs: "byte" (ids 0..255 are the UTF-8 bytes, 256 is <|endoftext|>);
// "sentencepiece:PATH" (a SentencePiece .model); "tiktoken:PATH[:ENCODING]" (a tiktoken rank
// file; the encoding is inferred from a name like cl100k_base.tiktoken when omitted);
// "hf:PATH" (a byte-level BPE or a WordPiece tokenizer.json, or a folder holding one).
std::unique_ptr<Tokenizer> make_tokenizer(const std::string& spec);

// Returns a problem description (e.g. "unknown tokenizer 'bpe' (expected: ...)") or nullopt.
// It loads the tokenizer, so a malformed file is reported here.
std::optional<std::string> check_tokenizer_spec(const std::string& spec);

// The files a Hugging Face folder needs to load this tokenizer with AutoTokenizer: the source
// path and the name it takes in the folder. hf:PATH gives tokenizer.json and, where they lie
// beside it, tokenizer_config.json and special_tokens_map.json; sentencepiece:MODEL gives
// tokenizer.model; byte and tiktoken have no file transformers reads.
struct TokenizerFile {
  std::string source;
  std::string name;
};
std::vector<TokenizerFile> hf_tokenizer_files(const std::string& spec);

}  // namespace xtrain::text
