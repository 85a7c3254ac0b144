#include "text/hf_tokenizer_file.h"

#include <sys/stat.h>

#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "text/hf_bpe_tokenizer.h"
#include "text/wordpiece_tokenizer.h"
#include "util/durable_file.h"
#include "util/input_error.h"

namespace xtrain::text {

using nlohmann::json;

std::string hf_tokenizer_json_path(const std::string& path) {
  struct stat info {};
  const bool folder = ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
  return folder ? path + "/tokenizer.json" : path;
}

json read_hf_tokenizer_json(const std::string& json_path) {
  const std::string text = util::read_file(json_path);
  try {
    return json::parse(text);
  } catch (const json::exception& e) {  // a syntax error, or a number out of range
    throw InputError(fmt::format("{}: not valid JSON ({}); data.tokenizer hf:PATH takes a Hugging Face "
                                 "tokenizer.json",
                                 json_path, e.what()));
  }
}

AddedToken parse_added_token(const json& entry) {
  AddedToken token;
  token.content = entry.at("content").get<std::string>();
  const json& id = entry.at("id");
  if (!id.is_number_integer())
    throw std::invalid_argument(fmt::format("the id of '{}' is {}, not an integer", token.content, id.dump()));
  if (id.is_number_unsigned() && id.get<uint64_t>() > static_cast<uint64_t>(kMaxHfTokenId))
    throw std::invalid_argument(fmt::format("'{}' has id {}, outside 0-{}", token.content, id.dump(), kMaxHfTokenId));
  token.id = id.get<int64_t>();
  token.special = entry.value("special", false);
  token.lstrip = entry.value("lstrip", false);
  token.rstrip = entry.value("rstrip", false);
  token.normalized = entry.value("normalized", !token.special);
  if (entry.value("single_word", false))
    throw std::invalid_argument(fmt::format("'{}' has single_word set, which is not supported", token.content));
  if (token.id < 0 || token.id > kMaxHfTokenId)
    throw std::invalid_argument(fmt::format("'{}' has id {}, outside 0-{}", token.content, token.id, kMaxHfTokenId));
  return token;
}

std::unique_ptr<Tokenizer> make_hf_tokenizer(const std::string& path) {
  const std::string json_path = hf_tokenizer_json_path(path);
  const json file = read_hf_tokenizer_json(json_path);
  // Files of older libraries leave a BPE model untyped; the BPE reader reports any other type.
  std::string type = "BPE";
  if (file.is_object() && file.contains("model") && file["model"].is_object()) {
    const json& model = file["model"];
    if (model.contains("type") && model["type"].is_string()) type = model["type"].get<std::string>();
  }
  if (type == "WordPiece") return std::make_unique<WordPieceTokenizer>(json_path, file);
  return std::make_unique<HfBpeTokenizer>(json_path, file);
}

void encode_around_added_tokens(std::string_view text, const AddedTokenMatcher& raw_added,
                                const UnicodeNormalizer& normalizer, const AddedTokenMatcher& normalized_added,
                                const std::function<void(std::string_view, std::vector<int64_t>&)>& encode_segment,
                                std::vector<int64_t>& ids) {
  for (const auto& raw : raw_added.split(text)) {
    if (raw.id >= 0) {
      ids.push_back(raw.id);
      continue;
    }
    const std::string_view segment = text.substr(raw.begin, raw.end - raw.begin);
    if (normalizer.identity() && normalized_added.empty()) {
      encode_segment(segment, ids);
      continue;
    }
    const std::string normalized = normalizer.normalize(segment);
    for (const auto& part : normalized_added.split(normalized)) {
      if (part.id >= 0)
        ids.push_back(part.id);
      else
        encode_segment(std::string_view(normalized).substr(part.begin, part.end - part.begin), ids);
    }
  }
}

}  // namespace xtrain::text
