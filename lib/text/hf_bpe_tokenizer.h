// HfBpeTokenizer: a Hugging Face byte-level BPE tokenizer.json (GPT-2, Llama 3, Qwen2 style).
// encode() follows the library's encode(text, add_special_tokens=False): added tokens
// (<|endoftext|>, <|im_start|>, ...) written in the text become their ids, the rest goes
// through the normalizer, the pre-tokenizer and the BPE model. The post_processor (BOS and
// template tokens) is not applied: documents are joined with eos_id() instead. BPE dropout is
// not applied. eos_id() is the eos_token of a tokenizer_config.json beside the file, else the
// first of <|endoftext|>, <|end_of_text|>, </s>, <eos> that the file defines. decode() renders
// ordinary tokens and non-special added tokens, and skips special tokens.
#pragma once
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "text/added_token_matcher.h"
#include "text/hf_pre_tokenizer.h"
#include "text/merge_bpe.h"
#include "text/piece_cache.h"
#include "text/tokenizer.h"
#include "text/unicode_normalizer.h"

namespace xtrain::text {

class HfBpeTokenizer final : public Tokenizer {
 public:
  // `path` is a tokenizer.json or a folder holding one. InputError naming the file and the
  // unsupported or malformed part.
  explicit HfBpeTokenizer(const std::string& path);
  // `file` is the parsed content of the tokenizer.json at `json_path`.
  HfBpeTokenizer(const std::string& json_path, const nlohmann::json& file);
  ~HfBpeTokenizer() override;

  std::vector<int64_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(token_text_.size()); }
  int64_t eos_id() const override { return eos_id_; }
  std::string name() const override { return "hf:" + path_; }

 private:
  void encode_segment(std::string_view text, std::vector<int64_t>& ids) const;
  // token_text_ from the vocabulary: each id's bytes (its spelling where it is not byte-level).
  void read_token_texts(const std::unordered_map<std::string, int64_t>& text_to_id);
  // The added tokens' matchers and texts; text_to_id learns their ids.
  void read_added_tokens(const nlohmann::json& entries, std::unordered_map<std::string, int64_t>& text_to_id);

  std::string path_;
  std::unique_ptr<UnicodeNormalizer> normalizer_;
  std::unique_ptr<HfPreTokenizer> pre_tokenizer_;
  std::unique_ptr<MergeBpe> model_;
  std::unique_ptr<AddedTokenMatcher> raw_added_;         // matched before normalization
  std::unique_ptr<AddedTokenMatcher> normalized_added_;  // matched in normalized text
  std::vector<std::string> token_text_;                  // id -> bytes decode() writes
  int64_t eos_id_ = -1;
  PieceCache cache_;
};

}  // namespace xtrain::text
