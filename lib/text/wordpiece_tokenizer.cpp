#include "text/wordpiece_tokenizer.h"

#include <algorithm>
#include <stdexcept>
#include <unordered_set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "text/hf_tokenizer_file.h"
#include "util/input_error.h"

namespace xtrain::text {

namespace {

using nlohmann::json;

// Reads a token id of the file, refusing what would not index a table.
int64_t checked_id(const json& id, const std::string& what) {
  if (!id.is_number_integer())
    throw std::invalid_argument(fmt::format("the id of {} is {}, not an integer", what, id.dump()));
  const int64_t value = id.get<int64_t>();
  if (value < 0 || value > kMaxHfTokenId)
    throw std::invalid_argument(fmt::format("the id of {} is {}, outside 0-{}", what, value, kMaxHfTokenId));
  return value;
}

void replace_every(std::string& text, std::string_view from, std::string_view to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
}

// The WordPiece decoder's `cleanup`, the library's clean_up_tokenization on one token.
void clean_up_tokenization(std::string& token) {
  static const std::pair<std::string_view, std::string_view> kRules[] = {
      {" .", "."},      {" ?", "?"},   {" !", "!"},   {" ,", ","},          {" ' ", "'"},   {" n't", "n't"},
      {" 'm", "'m"},    {" do not", " don't"},        {" 's", "'s"},        {" 've", "'ve"}, {" 're", "'re"},
  };
  for (const auto& [from, to] : kRules) replace_every(token, from, to);
}

}  // namespace

WordPieceTokenizer::WordPieceTokenizer(const std::string& path)
    : WordPieceTokenizer(hf_tokenizer_json_path(path), read_hf_tokenizer_json(hf_tokenizer_json_path(path))) {}

WordPieceTokenizer::WordPieceTokenizer(const std::string& json_path, const json& file) : path_(json_path) {
  // Everything below reads the parsed file; any shape problem is reported with its JSON part.
  std::string part = "model";
  try {
    read_model(file.at("model"));
    part = "normalizer";
    normalizer_ = std::make_unique<UnicodeNormalizer>(file.value("normalizer", json()));
    part = "pre_tokenizer";
    pre_tokenizer_ = std::make_unique<BertPreTokenizer>(file.value("pre_tokenizer", json()));
    part = "added_tokens";
    read_added_tokens(file.value("added_tokens", json::array()));
    part = "post_processor";
    read_post_processor(file.value("post_processor", json()));
    part = "decoder";
    read_decoder(file.value("decoder", json()));

    part = "end-of-text token";
    if (!template_after_.empty()) {
      eos_id_ = template_after_.back();
    } else if (auto sep = token_id("[SEP]")) {
      eos_id_ = *sep;
    } else {
      throw std::invalid_argument(
          "no [SEP] token and no post_processor template ending in one, to separate documents with");
    }
  } catch (const InputError&) {
    throw;
  } catch (const std::exception& e) {
    // nlohmann's type and out-of-range errors, and our own std::invalid_argument.
    throw InputError(fmt::format("{}: {}: {}", path_, part, e.what()));
  }
}

WordPieceTokenizer::~WordPieceTokenizer() = default;

void WordPieceTokenizer::read_model(const json& model) {
  const std::string type = model.at("type").get<std::string>();
  if (type != "WordPiece") throw std::invalid_argument(fmt::format("type is {}, not WordPiece", type));
  std::vector<std::pair<std::string, int64_t>> vocab;
  int64_t max_id = -1;
  for (const auto& [text, id_json] : model.at("vocab").items()) {
    const int64_t id = checked_id(id_json, "'" + text + "' in the vocab");
    vocab.emplace_back(text, id);
    token_ids_.emplace(text, id);
    max_id = std::max(max_id, id);
  }
  token_text_.resize(static_cast<size_t>(max_id + 1));
  for (const auto& [text, id] : vocab) token_text_[static_cast<size_t>(id)] = text;

  WordPieceModel::Options options;
  const std::string unk = model.value("unk_token", "[UNK]");
  auto unk_id = token_ids_.find(unk);
  if (unk_id == token_ids_.end()) throw std::invalid_argument(fmt::format("unk_token '{}' is not in the vocab", unk));
  options.unk_id = unk_id->second;
  options.continuing_subword_prefix = model.value("continuing_subword_prefix", "##");
  const json max_chars = model.value("max_input_chars_per_word", json(100));
  if (!max_chars.is_number_unsigned())
    throw std::invalid_argument(fmt::format("max_input_chars_per_word is {}, not a count", max_chars.dump()));
  options.max_input_chars_per_word = max_chars.get<size_t>();
  model_ = std::make_unique<WordPieceModel>(vocab, std::move(options));
}

void WordPieceTokenizer::read_added_tokens(const json& entries) {
  std::vector<AddedToken> raw, normalized;
  std::unordered_set<std::string> special;
  for (const json& entry : entries) {
    AddedToken token = parse_added_token(entry);
    const auto id = static_cast<size_t>(token.id);
    // An added token takes an id of its own or its own text's in the vocab, not another token's.
    if (id < token_text_.size() && !token_text_[id].empty() && token_text_[id] != token.content)
      throw std::invalid_argument(fmt::format("'{}' has id {}, which the vocab gives to '{}'; give the added token an "
                                              "id of its own",
                                              token.content, token.id, token_text_[id]));
    if (id >= token_text_.size()) token_text_.resize(id + 1);
    token_text_[id] = token.content;
    token_ids_[token.content] = token.id;
    if (token.special) special.insert(token.content);
    if (token.normalized) {
      // The library looks for a normalized token by its normalized spelling.
      token.content = normalizer_->normalize(token.content);
      normalized.push_back(token);
    } else {
      raw.push_back(token);
    }
  }
  raw_added_ = std::make_unique<AddedTokenMatcher>(raw);
  normalized_added_ = std::make_unique<AddedTokenMatcher>(normalized);
  // The library skips a token in decoding by its text: any id spelled as a special token.
  special_.resize(token_text_.size());
  for (size_t id = 0; id < token_text_.size(); ++id) special_[id] = special.count(token_text_[id]) > 0;
}

void WordPieceTokenizer::read_post_processor(const json& spec) {
  if (spec.is_null()) return;
  const std::string type = spec.value("type", "");
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    // "cls": ["[CLS]", 101], "sep": ["[SEP]", 102]
    template_before_ = {checked_id(spec.at("cls").at(1), "the cls token")};
    template_after_ = {checked_id(spec.at("sep").at(1), "the sep token")};
    return;
  }
  if (type != "TemplateProcessing")
    throw std::invalid_argument(fmt::format("unsupported post_processor type '{}' (supported: TemplateProcessing, "
                                            "BertProcessing, RobertaProcessing, or none)",
                                            type));
  // "single": [{"SpecialToken": {"id": "[CLS]"}}, {"Sequence": {"id": "A"}}, {"SpecialToken": ...}]
  // with each SpecialToken's ids under "special_tokens".
  bool sequence_seen = false;
  for (const json& piece : spec.at("single")) {
    if (piece.contains("Sequence")) {
      const std::string id = piece.at("Sequence").at("id").get<std::string>();
      if (id != "A" || sequence_seen)
        throw std::invalid_argument(fmt::format("the single template takes sequence {} where only one A fits", id));
      sequence_seen = true;
      continue;
    }
    const std::string name = piece.at("SpecialToken").at("id").get<std::string>();
    const json& special = spec.at("special_tokens").at(name);
    for (const json& id : special.at("ids"))
      (sequence_seen ? template_after_ : template_before_).push_back(checked_id(id, "'" + name + "'"));
  }
  if (!sequence_seen) throw std::invalid_argument("the single template has no $A");
}

void WordPieceTokenizer::read_decoder(const json& spec) {
  if (spec.is_null()) return;
  const std::string type = spec.value("type", "");
  if (type != "WordPiece")
    throw std::invalid_argument(fmt::format("unsupported decoder type '{}' (supported: WordPiece, or none)", type));
  has_decoder_ = true;
  decoder_prefix_ = spec.value("prefix", "##");
  decoder_cleanup_ = spec.value("cleanup", true);
}

std::optional<int64_t> WordPieceTokenizer::token_id(std::string_view token) const {
  auto it = token_ids_.find(std::string(token));
  if (it == token_ids_.end()) return std::nullopt;
  return it->second;
}

std::vector<int64_t> WordPieceTokenizer::with_special_tokens(const std::vector<int64_t>& ids) const {
  std::vector<int64_t> framed(template_before_);
  framed.reserve(template_before_.size() + ids.size() + template_after_.size());
  framed.insert(framed.end(), ids.begin(), ids.end());
  framed.insert(framed.end(), template_after_.begin(), template_after_.end());
  return framed;
}

void WordPieceTokenizer::encode_segment(std::string_view text, std::vector<int64_t>& ids) const {
  pre_tokenizer_->split(text, [&](std::string_view piece) {
    if (cache_.append(piece, ids)) return;
    const size_t from = ids.size();
    model_->encode(piece, ids);
    cache_.store(piece, ids, from);
  });
}

std::vector<int64_t> WordPieceTokenizer::encode(std::string_view text) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size() / 4);
  encode_around_added_tokens(
      text, *raw_added_, *normalizer_, *normalized_added_,
      [this](std::string_view segment, std::vector<int64_t>& out) { encode_segment(segment, out); }, ids);
  return ids;
}

std::string WordPieceTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string text;
  bool first = true;
  for (int64_t id : ids) {
    if (id < 0 || id >= vocab_size()) continue;
    const auto index = static_cast<size_t>(id);
    if (special_[index] || token_text_[index].empty()) continue;
    std::string token = token_text_[index];
    if (!has_decoder_) {
      if (!first) text += ' ';
    } else {
      if (!first) {
        const bool continues = token.compare(0, decoder_prefix_.size(), decoder_prefix_) == 0;
        token = continues ? token.substr(decoder_prefix_.size()) : " " + token;
      }
      if (decoder_cleanup_) clean_up_tokenization(token);
    }
    text += token;
    first = false;
  }
  return text;
}

}  // namespace xtrain::text
