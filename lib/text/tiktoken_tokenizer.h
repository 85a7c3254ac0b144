// TiktokenTokenizer: OpenAI's byte-level BPE from a tiktoken rank file (one "base64-token rank"
// per line) and a named encoding (gpt2, r50k_base, p50k_base, cl100k_base, o200k_base), which
// supplies the pre-tokenizer regex and the special tokens. encode() is tiktoken's
// encode_ordinary: special-token text such as "<|endoftext|>" inside a document is ordinary
// text. eos_id() is <|endoftext|>; decode() renders ordinary tokens and skips special ones.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "text/piece_cache.h"
#include "text/token_ranks.h"
#include "text/tokenizer.h"
#include "text/unicode_regex.h"

namespace xtrain::text {

class TiktokenTokenizer final : public Tokenizer {
 public:
  // The encodings this build knows, in the order error messages list them.
  static const std::vector<std::string>& encoding_names();
  // The encoding a rank file's name implies ("cl100k_base.tiktoken" -> "cl100k_base"), or "".
  static std::string encoding_from_file_name(const std::string& path);

  // encoding empty: infer it from the file name. InputError for an unreadable or malformed
  // file or an unknown encoding.
  TiktokenTokenizer(const std::string& path, const std::string& encoding);

  std::vector<int64_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  int64_t vocab_size() const override { return vocab_size_; }
  int64_t eos_id() const override { return eos_id_; }
  std::string name() const override { return name_; }

 private:
  void encode_piece(std::string_view piece, std::vector<int64_t>& out) const;

  std::string name_;
  std::unique_ptr<TokenRanks> ranks_;
  UnicodeRegex pattern_;
  int64_t eos_id_ = 0;
  int64_t vocab_size_ = 0;
  PieceCache cache_;
};

}  // namespace xtrain::text
