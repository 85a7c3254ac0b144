#include "text/hf_bpe_tokenizer.h"

#include <sys/stat.h>

#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "text/byte_level_alphabet.h"
#include "text/hf_tokenizer_file.h"
#include "util/input_error.h"

namespace xtrain::text {

namespace {

using nlohmann::json;

std::string parent_folder(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// The eos_token that a tokenizer_config.json beside the file names, if any.
std::string configured_eos(const std::string& tokenizer_path) {
  const std::string config_path = parent_folder(tokenizer_path) + "/tokenizer_config.json";
  struct stat info {};
  if (::stat(config_path.c_str(), &info) != 0) return "";
  const json config = read_hf_tokenizer_json(config_path);
  if (!config.is_object())
    throw InputError(fmt::format("{}: a tokenizer_config.json is a JSON object (eos_token, ...), got {}", config_path,
                                 config.dump().substr(0, 80)));
  const json eos = config.value("eos_token", json());
  if (eos.is_null()) return "";
  if (eos.is_string()) return eos.get<std::string>();
  if (eos.is_object() && eos.contains("content") && eos.at("content").is_string())
    return eos.at("content").get<std::string>();
  // transformers takes a token's text (or an AddedToken's "content"), never its id.
  throw InputError(fmt::format("{}: eos_token is {}; it must be the text of the token that ends a document, as "
                               "\"eos_token\": \"</s>\" or {{\"content\": \"</s>\"}}",
                               config_path, eos.dump().substr(0, 80)));
}

std::vector<std::string> merge_parts(const json& merge) {
  if (merge.is_array()) return merge.get<std::vector<std::string>>();
  const std::string line = merge.get<std::string>();
  std::vector<std::string> parts;
  size_t begin = 0;
  for (size_t space; (space = line.find(' ', begin)) != std::string::npos; begin = space + 1)
    parts.push_back(line.substr(begin, space - begin));
  parts.push_back(line.substr(begin));
  return parts;
}

using TokenIds = std::unordered_map<std::string, int64_t>;

void check_model_type(const json& model) {
  const std::string type = model.value("type", "BPE");
  if (type != "BPE")
    throw std::invalid_argument(fmt::format("type is {}, but only BPE and WordPiece models are supported", type));
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(key) && !model.at(key).is_null() && !model.at(key).get<std::string>().empty())
      throw std::invalid_argument(fmt::format("{} is not supported", key));
}

// The vocabulary as spelled in the file (the byte-level alphabet).
TokenIds read_vocab(const json& model) {
  TokenIds text_to_id;
  for (const auto& [text, id_json] : model.at("vocab").items()) {
    if (!id_json.is_number_integer())
      throw std::invalid_argument(fmt::format("vocab id of '{}' is {}, not an integer", text, id_json.dump()));
    if (id_json.is_number_unsigned() && id_json.get<uint64_t>() > static_cast<uint64_t>(kMaxHfTokenId))
      throw std::invalid_argument(fmt::format("vocab id {} of '{}' is outside 0-{}", id_json.dump(), text,
                                              kMaxHfTokenId));
    const int64_t id = id_json.get<int64_t>();
    if (id < 0 || id > kMaxHfTokenId)
      throw std::invalid_argument(fmt::format("vocab id {} of '{}' is outside 0-{}", id, text, kMaxHfTokenId));
    text_to_id.emplace(text, id);
  }
  return text_to_id;
}

std::vector<MergeBpe::Merge> read_merges(const json& model, const TokenIds& text_to_id) {
  std::vector<MergeBpe::Merge> merges;
  const json& merge_list = model.value("merges", json::array());
  merges.reserve(merge_list.size());
  for (const json& merge : merge_list) {
    const std::vector<std::string> parts = merge_parts(merge);
    if (parts.size() != 2) throw std::invalid_argument(fmt::format("merge {} is not a pair of tokens", merge.dump()));
    auto left = text_to_id.find(parts[0]), right = text_to_id.find(parts[1]),
         merged = text_to_id.find(parts[0] + parts[1]);
    if (left == text_to_id.end() || right == text_to_id.end() || merged == text_to_id.end())
      throw std::invalid_argument(fmt::format("merge {} uses or makes a token missing from the vocab", merge.dump()));
    merges.push_back({left->second, right->second, merged->second});
  }
  return merges;
}

MergeBpe::Options read_model_options(const json& model, const TokenIds& text_to_id) {
  MergeBpe::Options options;
  if (model.contains("unk_token") && !model.at("unk_token").is_null()) {
    const std::string unk = model.at("unk_token").get<std::string>();
    auto it = text_to_id.find(unk);
    if (it == text_to_id.end()) throw std::invalid_argument(fmt::format("unk_token '{}' is not in the vocab", unk));
    options.unk_id = it->second;
  }
  options.fuse_unk = model.value("fuse_unk", false);
  options.byte_fallback = model.value("byte_fallback", false);
  options.ignore_merges = model.value("ignore_merges", false);
  return options;
}

// The token that ends a document: tokenizer_config.json's eos_token, else the usual spellings.
int64_t find_eos(const std::string& tokenizer_path, const TokenIds& text_to_id) {
  const std::string configured = configured_eos(tokenizer_path);
  for (const std::string& candidate :
       configured.empty() ? std::vector<std::string>{"<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>"}
                          : std::vector<std::string>{configured})
    if (auto it = text_to_id.find(candidate); it != text_to_id.end()) return it->second;
  throw std::invalid_argument(
      configured.empty()
          ? "none of <|endoftext|>, <|end_of_text|>, </s>, <eos> is a token; name the one that ends a document as "
            "eos_token in a tokenizer_config.json beside tokenizer.json"
          : fmt::format("eos_token '{}' of tokenizer_config.json is not a token", configured));
}

}  // namespace

HfBpeTokenizer::HfBpeTokenizer(const std::string& path)
    : HfBpeTokenizer(hf_tokenizer_json_path(path), read_hf_tokenizer_json(hf_tokenizer_json_path(path))) {}

HfBpeTokenizer::HfBpeTokenizer(const std::string& json_path, const json& file) : path_(json_path) {
  // Everything below reads the parsed file; any shape problem is reported with its JSON part.
  std::string part = "model";
  try {
    const json& model = file.at("model");
    check_model_type(model);
    TokenIds text_to_id = read_vocab(model);
    read_token_texts(text_to_id);
    // The model works on raw bytes: its vocabulary is the byte-level spellings decoded.
    TokenIds bytes_to_id;
    for (const auto& [text, id] : text_to_id)
      if (auto bytes = byte_level_to_bytes(text)) bytes_to_id.emplace(*bytes, id);
    const auto merges = read_merges(model, text_to_id);
    model_ = std::make_unique<MergeBpe>(std::move(bytes_to_id), merges, read_model_options(model, text_to_id));

    part = "normalizer";
    normalizer_ = std::make_unique<UnicodeNormalizer>(file.value("normalizer", json()));
    part = "pre_tokenizer";
    pre_tokenizer_ = std::make_unique<HfPreTokenizer>(file.value("pre_tokenizer", json()));
    part = "added_tokens";
    read_added_tokens(file.value("added_tokens", json::array()), text_to_id);
    part = "end-of-text token";
    eos_id_ = find_eos(path_, text_to_id);
  } catch (const InputError&) {
    throw;
  } catch (const std::exception& e) {
    // nlohmann's type and out-of-range errors, and our own std::invalid_argument.
    throw InputError(fmt::format("{}: {}: {}", path_, part, e.what()));
  }
}

void HfBpeTokenizer::read_token_texts(const std::unordered_map<std::string, int64_t>& text_to_id) {
  int64_t max_id = -1;
  for (const auto& entry : text_to_id) max_id = std::max(max_id, entry.second);
  token_text_.resize(static_cast<size_t>(max_id + 1));
  for (const auto& [text, id] : text_to_id) {
    const auto bytes = byte_level_to_bytes(text);
    token_text_[static_cast<size_t>(id)] = bytes ? *bytes : text;
  }
}

void HfBpeTokenizer::read_added_tokens(const nlohmann::json& entries,
                                       std::unordered_map<std::string, int64_t>& text_to_id) {
  std::vector<AddedToken> raw, normalized;
  std::unordered_map<int64_t, std::string> vocab_text;  // the vocab's spelling of each id
  for (const auto& [text, id] : text_to_id) vocab_text.emplace(id, text);
  for (const json& entry : entries) {
    AddedToken token = parse_added_token(entry);
    // An added token takes an id of its own or its own text's in the vocab; one that took another
    // token's id would make that token's every occurrence an end of document, or a special.
    if (const auto it = vocab_text.find(token.id);
        it != vocab_text.end() && it->second != token.content && byte_level_to_bytes(it->second) != token.content)
      throw std::invalid_argument(fmt::format("'{}' has id {}, which the vocab gives to '{}'; give the added token an "
                                              "id of its own",
                                              token.content, token.id, it->second));
    vocab_text[token.id] = token.content;
    if (static_cast<size_t>(token.id) >= token_text_.size()) token_text_.resize(static_cast<size_t>(token.id) + 1);
    // decode() skips special tokens, so only the others keep their text.
    token_text_[static_cast<size_t>(token.id)] = token.special ? "" : token.content;
    if (token.normalized) {
      // Hugging Face looks for a normalized token by its normalized spelling.
      token.content = normalizer_->normalize(token.content);
      normalized.push_back(token);
    } else {
      raw.push_back(token);
    }
    text_to_id[entry.at("content").get<std::string>()] = token.id;
  }
  raw_added_ = std::make_unique<AddedTokenMatcher>(raw);
  normalized_added_ = std::make_unique<AddedTokenMatcher>(normalized);
}

HfBpeTokenizer::~HfBpeTokenizer() = default;

void HfBpeTokenizer::encode_segment(std::string_view text, std::vector<int64_t>& ids) const {
  pre_tokenizer_->split(text, [&](std::string_view piece) {
    if (cache_.append(piece, ids)) return;
    const size_t from = ids.size();
    model_->encode(piece, ids);
    cache_.store(piece, ids, from);
  });
}

std::vector<int64_t> HfBpeTokenizer::encode(std::string_view text) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size() / 3);
  encode_around_added_tokens(
      text, *raw_added_, *normalizer_, *normalized_added_,
      [this](std::string_view segment, std::vector<int64_t>& out) { encode_segment(segment, out); }, ids);
  return ids;
}

std::string HfBpeTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string text;
  for (int64_t id : ids)
    if (id >= 0 && id < vocab_size()) text += token_text_[static_cast<size_t>(id)];
  return text;
}

}  // namespace xtrain::text
