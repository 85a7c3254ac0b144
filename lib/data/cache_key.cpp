#include "data/cache_key.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "data/sources/text_source.h"
#include "util/file_digest.h"
#include "util/input_error.h"

namespace xtrain::data {
namespace {

namespace fs = std::filesystem;

SourceFile fingerprint_file(const std::string& path, const std::string& kind) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) throw InputError(path + ": cannot read: " + std::strerror(errno));
  SourceFile file;
  file.path = fs::absolute(path).lexically_normal().string();
  file.kind = kind;
  file.mtime_ns = static_cast<int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec;
  file.xxh3 = util::file_xxh3(path, &file.size);
  return file;
}

// The files a tokenizer spec reads: hf: a tokenizer.json (and the configs beside it),
// sentencepiece: a .model, tiktoken: a rank file with an optional ":ENCODING" after it.
std::vector<std::string> tokenizer_files(const std::string& spec, std::string& suffix) {
  const auto colon = spec.find(':');
  if (colon == std::string::npos) return {};
  const std::string kind = spec.substr(0, colon);
  std::string rest = spec.substr(colon + 1);
  if (kind == "hf") {
    std::vector<std::string> files;
    for (const auto& file : text::hf_tokenizer_files(spec)) files.push_back(file.source);
    return files;
  }
  std::error_code error;
  if (kind == "tiktoken" && !fs::is_regular_file(rest, error)) {
    const auto last = rest.rfind(':');
    if (last != std::string::npos) {
      suffix = rest.substr(last + 1);
      rest = rest.substr(0, last);
    }
  }
  return {rest};
}

}  // namespace

bool is_cacheable_source(const std::string& source) {
  return source.rfind("builtin:", 0) != 0 && !is_megatron_source(source);
}

std::vector<SourceFile> fingerprint_source(const std::string& source) {
  std::vector<SourceFile> files;
  for (const auto& input : document_inputs(source))
    files.push_back(fingerprint_file(input.name, input.kind == DocumentInput::Kind::JsonlFile ? "jsonl" : "text"));
  return files;
}

std::string tokenizer_fingerprint(const std::string& spec, const text::Tokenizer& tokenizer) {
  std::string suffix;
  const std::vector<std::string> files = tokenizer_files(spec, suffix);
  std::string fingerprint = spec.substr(0, spec.find(':'));
  for (const auto& file : files) fingerprint += ":" + util::file_xxh3(file);
  if (!suffix.empty()) fingerprint += ":" + suffix;
  return fingerprint + fmt::format(":vocab={}:eos={}", tokenizer.vocab_size(), tokenizer.eos_id());
}

nlohmann::json key_inputs_json(const CacheKeyInputs& inputs) {
  nlohmann::json files = nlohmann::json::array();
  for (const auto& file : inputs.files)
    files.push_back({{"kind", file.kind}, {"size", file.size}, {"mtime_ns", file.mtime_ns}, {"xxh3", file.xxh3}});
  return {{"format", kCacheFormatVersion},   {"files", files},
          {"tokenizer", inputs.tokenizer},   {"chat_template", inputs.chat_template},
          {"objective", inputs.objective},   {"seq_len", inputs.seq_len}};
}

std::string cache_key(const CacheKeyInputs& inputs) { return util::xxh3_hex(key_inputs_json(inputs).dump()); }

}  // namespace xtrain::data
