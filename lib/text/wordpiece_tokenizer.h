// WordPieceTokenizer: a Hugging Face tokenizer.json whose model is WordPiece (BERT and its
// kin). encode() follows the library's encode(text, add_special_tokens=False): added tokens
// ([CLS], [SEP], [MASK], ...) written in the text become their ids, the rest goes through the
// normalizer (BertNormalizer, Lowercase, Unicode forms: unicode_normalizer.h), the
// pre-tokenizer (bert_pre_tokenizer.h) and the WordPiece model (wordpiece_model.h).
// encode() adds no [CLS] or [SEP]: with_special_tokens() applies the post_processor
// (TemplateProcessing's single template, or BertProcessing) where a caller wants that framing,
// and token_id() finds [CLS], [SEP], [MASK], [PAD], [UNK] by name. eos_id() is the token that
// ends the single template ([SEP]), else the token [SEP]. decode() follows the WordPiece
// decoder with skip_special_tokens: tokens are joined by spaces, a "##" piece is glued to the
// one before, and `cleanup` takes the space away before . ? ! , and English contractions.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "text/added_token_matcher.h"
#include "text/bert_pre_tokenizer.h"
#include "text/piece_cache.h"
#include "text/tokenizer.h"
#include "text/unicode_normalizer.h"
#include "text/wordpiece_model.h"

namespace xtrain::text {

class WordPieceTokenizer final : public Tokenizer {
 public:
  // `path` is a tokenizer.json or a folder holding one. InputError naming the file and the
  // unsupported or malformed part.
  explicit WordPieceTokenizer(const std::string& path);
  // `file` is the parsed content of the tokenizer.json at `json_path`.
  WordPieceTokenizer(const std::string& json_path, const nlohmann::json& file);
  ~WordPieceTokenizer() override;

  std::vector<int64_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(token_text_.size()); }
  int64_t eos_id() const override { return eos_id_; }
  std::string name() const override { return "hf:" + path_; }

  // `ids` (one encoded sequence) framed as the post_processor frames a single sequence:
  // [CLS] ids [SEP] for BERT; unchanged when the file has no post_processor.
  std::vector<int64_t> with_special_tokens(const std::vector<int64_t>& ids) const;
  // The id of a vocabulary or added token spelled exactly `token`, e.g. "[MASK]".
  std::optional<int64_t> token_id(std::string_view token) const override;

 private:
  void read_model(const nlohmann::json& model);
  void read_added_tokens(const nlohmann::json& entries);
  void read_post_processor(const nlohmann::json& spec);
  void read_decoder(const nlohmann::json& spec);
  void encode_segment(std::string_view text, std::vector<int64_t>& ids) const;

  std::string path_;
  std::unique_ptr<UnicodeNormalizer> normalizer_;
  std::unique_ptr<BertPreTokenizer> pre_tokenizer_;
  std::unique_ptr<WordPieceModel> model_;
  std::unique_ptr<AddedTokenMatcher> raw_added_;         // matched before normalization
  std::unique_ptr<AddedTokenMatcher> normalized_added_;  // matched in normalized text
  std::unordered_map<std::string, int64_t> token_ids_;   // vocabulary and added tokens
  std::vector<std::string> token_text_;                  // id -> token; added tokens win
  std::vector<bool> special_;                            // id -> decode() skips it
  std::vector<int64_t> template_before_, template_after_;  // the post_processor's ids around $A
  bool has_decoder_ = false;     // without one, decode() joins tokens with spaces
  std::string decoder_prefix_;   // the WordPiece decoder's prefix
  bool decoder_cleanup_ = false;
  int64_t eos_id_ = -1;
  PieceCache cache_;
};

}  // namespace xtrain::text
