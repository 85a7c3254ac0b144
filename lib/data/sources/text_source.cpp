#include "data/sources/text_source.h"

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <iterator>
#include <string_view>

#include "data/sources/demo_corpus.h"
#include "data/sources/indexed_dataset_format.h"
#include "data/sources/source_list.h"
#include "util/input_error.h"

namespace xtrain::data {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kBuiltinPrefix = "builtin:";
constexpr std::string_view kMegatronPrefix = "megatron:";
constexpr std::string_view kDemo = "builtin:demo";
constexpr std::string_view kDemoEval = "builtin:demo-eval";

bool is_builtin(const std::string& spec) { return spec.rfind(kBuiltinPrefix, 0) == 0; }

std::optional<std::string> check_builtin(const std::string& spec) {
  if (spec == kDemo || spec == kDemoEval) return std::nullopt;
  return "unknown builtin source '" + spec + "' (expected builtin:demo or builtin:demo-eval)";
}

std::optional<std::string> check_megatron(const std::string& spec) {
  const std::string prefix = megatron_prefix(spec);
  if (prefix.empty()) return "megatron: needs a path prefix, e.g. megatron:data/web (for data/web.idx + data/web.bin)";
  std::error_code error;
  for (const auto& path : {index_path(prefix), data_path(prefix)})
    if (!fs::is_regular_file(path, error)) return "file not found: " + path + " (of " + spec + ")";
  return std::nullopt;
}

// A path to one file of an indexed dataset pair is most likely meant as the dataset.
std::optional<std::string> check_not_indexed_file(const std::string& spec) {
  const fs::path path(spec);
  if (path.extension() != ".idx" && path.extension() != ".bin") return std::nullopt;
  const std::string prefix = (path.parent_path() / path.stem()).string();
  std::error_code error;
  if (!fs::exists(index_path(prefix), error) || !fs::exists(data_path(prefix), error)) return std::nullopt;
  return spec + " is one file of a Megatron indexed dataset: write megatron:" + prefix + " to read it";
}

std::optional<std::string> check_single_source(const std::string& spec) {
  if (is_builtin(spec)) return check_builtin(spec);
  if (is_megatron_source(spec)) return check_megatron(spec);
  std::error_code error;
  if (!fs::exists(spec, error)) return "file not found: " + spec;
  return check_not_indexed_file(spec);
}

// builtin:demo is every story but the held-out tail, builtin:demo-eval the tail: the last
// 5% of the stories (at least one), so the two never overlap.
std::vector<std::string> load_builtin(const std::string& spec) {
  std::vector<std::string> stories = demo_documents();
  const size_t num_eval = std::max<size_t>(1, stories.size() / 20);
  const auto split = stories.end() - static_cast<std::ptrdiff_t>(num_eval);
  if (spec == kDemoEval) {
    return {std::make_move_iterator(split), std::make_move_iterator(stories.end())};
  }
  stories.erase(split, stories.end());
  return stories;
}

// Sorted by name so that the document order, and with it the token stream, is the same on
// every machine (directory iteration order is unspecified).
std::vector<DocumentInput> directory_inputs(const std::string& path) {
  std::error_code error;
  fs::directory_iterator listing(path, error);
  if (error) throw InputError(path + ": cannot list directory: " + error.message());
  std::vector<fs::path> files;
  for (const auto& entry : listing) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  if (files.empty()) throw InputError(path + ": directory contains no files");
  std::sort(files.begin(), files.end());
  std::vector<DocumentInput> inputs;
  for (const auto& file : files) inputs.push_back({DocumentInput::Kind::TextFile, file.string(), {}});
  return inputs;
}

}  // namespace

bool is_megatron_source(const std::string& spec) { return spec.rfind(kMegatronPrefix, 0) == 0; }

std::string megatron_prefix(const std::string& spec) { return spec.substr(kMegatronPrefix.size()); }

std::optional<std::string> check_source(const std::string& spec) {
  if (!is_source_list(spec)) return check_single_source(spec);
  std::vector<WeightedSource> sources;
  try {
    sources = parse_source_list(spec);
  } catch (const InputError& e) {
    return std::string(e.what());
  }
  for (size_t i = 0; i < sources.size(); ++i)
    if (auto problem = check_single_source(sources[i].path))
      return "source " + std::to_string(i + 1) + ": " + *problem;
  return std::nullopt;
}

std::vector<DocumentInput> document_inputs(const std::string& spec) {
  if (auto problem = check_single_source(spec)) throw InputError(*problem);
  if (is_megatron_source(spec)) throw InputError(spec + " holds token ids, not documents");
  if (is_builtin(spec)) return {{DocumentInput::Kind::Texts, spec, load_builtin(spec)}};
  if (fs::is_directory(spec)) return directory_inputs(spec);
  if (fs::path(spec).extension() == ".jsonl") return {{DocumentInput::Kind::JsonlFile, spec, {}}};
  return {{DocumentInput::Kind::TextFile, spec, {}}};
}

std::vector<std::string> load_documents(const std::string& spec) {
  DocumentReader reader(document_inputs(spec));
  std::vector<std::string> documents;
  while (auto chunk = reader.next())
    for (auto& document : parse_chunk(*chunk, RecordForm::Text)) documents.push_back(std::move(document.text));
  return documents;
}

}  // namespace xtrain::data
