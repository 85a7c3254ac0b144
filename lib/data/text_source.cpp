#include "data/text_source.h"

#include <algorithm>
#include <cstddef>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string_view>

#include <nlohmann/json.hpp>

#include "data/demo_corpus.h"
#include "util/input_error.h"

namespace xtrain::data {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kBuiltinPrefix = "builtin:";
constexpr std::string_view kDemo = "builtin:demo";
constexpr std::string_view kDemoEval = "builtin:demo-eval";

bool is_builtin(const std::string& spec) { return spec.rfind(kBuiltinPrefix, 0) == 0; }

std::optional<std::string> check_builtin(const std::string& spec) {
  if (spec == kDemo || spec == kDemoEval) return std::nullopt;
  return "unknown builtin source '" + spec + "' (expected builtin:demo or builtin:demo-eval)";
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

std::string read_whole_file(const fs::path& path, const std::string& shown_name) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(shown_name + ": cannot open: " + std::strerror(errno));
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) throw InputError(shown_name + ": read failed");
  return std::move(contents).str();
}

std::string read_nonempty_file(const fs::path& path, const std::string& shown_name) {
  std::string text = read_whole_file(path, shown_name);
  if (text.empty()) throw InputError(shown_name + ": file is empty");
  return text;
}

// "[json.exception.parse_error.101] parse error at line 1, column 7: syntax error ..." ->
// "invalid JSON at column 7: syntax error ...": the line number is ours, not the parser's.
std::string describe(const nlohmann::json::parse_error& error) {
  const std::string what = error.what();
  const size_t detail = what.find(": ");
  return "invalid JSON at column " + std::to_string(error.byte) +
         (detail == std::string::npos ? "" : what.substr(detail));
}

std::vector<std::string> load_jsonl(const std::string& path) {
  const std::string contents = read_whole_file(path, path);
  std::vector<std::string> documents;
  int64_t line_number = 0;
  for (size_t start = 0; start < contents.size();) {
    size_t end = contents.find('\n', start);
    if (end == std::string::npos) end = contents.size();
    std::string_view line(contents.data() + start, end - start);
    start = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    // Blank lines (a trailing newline, spacing between records) are harmless.
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;

    const std::string where = path + ":" + std::to_string(line_number) + ": ";
    nlohmann::json record;
    try {
      record = nlohmann::json::parse(line.begin(), line.end());
    } catch (const nlohmann::json::parse_error& e) {
      throw InputError(where + describe(e));
    }
    const auto text = record.find("text");  // end() for non-objects too
    if (text == record.end() || !text->is_string()) {
      throw InputError(where + "missing string field \"text\"");
    }
    documents.push_back(text->get<std::string>());
  }
  if (documents.empty()) {
    throw InputError(path + ": no documents (expected one JSON object per line)");
  }
  return documents;
}

// Sorted by name so that the document order, and with it the token stream, is the same on
// every machine (directory iteration order is unspecified).
std::vector<std::string> load_directory(const std::string& path) {
  std::error_code error;
  fs::directory_iterator listing(path, error);
  if (error) throw InputError(path + ": cannot list directory: " + error.message());
  std::vector<fs::path> files;
  for (const auto& entry : listing) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  if (files.empty()) throw InputError(path + ": directory contains no files");
  std::sort(files.begin(), files.end());
  std::vector<std::string> documents;
  documents.reserve(files.size());
  for (const auto& file : files) documents.push_back(read_nonempty_file(file, file.string()));
  return documents;
}

}  // namespace

std::optional<std::string> check_source(const std::string& spec) {
  if (is_builtin(spec)) return check_builtin(spec);
  std::error_code error;
  if (!fs::exists(spec, error)) return "file not found: " + spec;
  return std::nullopt;
}

std::vector<std::string> load_documents(const std::string& spec) {
  if (auto problem = check_source(spec)) throw InputError(*problem);
  if (is_builtin(spec)) return load_builtin(spec);
  if (fs::is_directory(spec)) return load_directory(spec);
  if (fs::path(spec).extension() == ".jsonl") return load_jsonl(spec);
  return {read_nonempty_file(spec, spec)};
}

}  // namespace xtrain::data
