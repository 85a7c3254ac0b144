#include "text/tokenizer.h"

#include <sys/stat.h>

#include <filesystem>

#include "text/byte_tokenizer.h"
#include "text/hf_tokenizer_file.h"
#include "text/sentencepiece_tokenizer.h"
#include "text/tiktoken_tokenizer.h"
#include "util/input_error.h"

namespace xtrain::text {

namespace {

const char* const kExpected =
    "expected: byte, sentencepiece:PATH, tiktoken:PATH[:ENCODING] or hf:PATH to a tokenizer.json";

bool starts_with(const std::string& text, const std::string& prefix) { return text.compare(0, prefix.size(), prefix) == 0; }

bool exists(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0;
}

// "PATH[:ENCODING]": the suffix names an encoding unless the whole is an existing file.
std::pair<std::string, std::string> split_tiktoken_spec(const std::string& rest) {
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos || exists(rest)) return {rest, ""};
  const std::string suffix = rest.substr(colon + 1);
  if (suffix.find('/') != std::string::npos) return {rest, ""};
  return {rest.substr(0, colon), suffix};
}

std::unique_ptr<Tokenizer> construct(const std::string& spec) {
  if (spec == "byte") return std::make_unique<ByteTokenizer>();
  if (starts_with(spec, "sentencepiece:") && spec.size() > 14)
    return std::make_unique<SentencePieceTokenizer>(spec.substr(14));
  if (starts_with(spec, "tiktoken:") && spec.size() > 9) {
    const auto [path, encoding] = split_tiktoken_spec(spec.substr(9));
    return std::make_unique<TiktokenTokenizer>(path, encoding);
  }
  if (starts_with(spec, "hf:") && spec.size() > 3) return make_hf_tokenizer(spec.substr(3));
  throw InputError("unknown tokenizer '" + spec + "' (" + kExpected + ")");
}

}  // namespace

std::optional<std::string> check_tokenizer_spec(const std::string& spec) {
  // Loading is the only complete check of a tokenizer file; it takes well under a second.
  try {
    construct(spec);
  } catch (const InputError& e) {
    return std::string(e.what());
  }
  return std::nullopt;
}

std::unique_ptr<Tokenizer> make_tokenizer(const std::string& spec) { return construct(spec); }

std::vector<TokenizerFile> hf_tokenizer_files(const std::string& spec) {
  namespace fs = std::filesystem;
  if (starts_with(spec, "sentencepiece:")) return {{spec.substr(14), "tokenizer.model"}};
  if (!starts_with(spec, "hf:")) return {};
  const fs::path path = spec.substr(3);
  const fs::path json = fs::is_directory(path) ? path / "tokenizer.json" : path;
  std::vector<TokenizerFile> files = {{json.string(), "tokenizer.json"}};
  for (const char* name : {"tokenizer_config.json", "special_tokens_map.json"})
    if (fs::is_regular_file(json.parent_path() / name)) files.push_back({(json.parent_path() / name).string(), name});
  return files;
}

}  // namespace xtrain::text
