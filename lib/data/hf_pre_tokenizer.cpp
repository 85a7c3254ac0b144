#include "data/hf_pre_tokenizer.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "data/unicode_regex.h"

namespace xtrain::data {

namespace {

// The pattern of ByteLevel's use_regex, GPT-2's.
const char* const kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::shared_ptr<const UnicodeRegex> compile(const std::string& pattern, bool literal) {
  UnicodeRegex::Options options;
  options.literal = literal;
  options.multiline = true;
  try {
    return std::make_shared<const UnicodeRegex>(pattern, options);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("Split pattern `{}`: {}", pattern, e.what()));
  }
}

}  // namespace

HfPreTokenizer::HfPreTokenizer(const nlohmann::json& spec) {
  if (spec.is_null())
    throw std::invalid_argument("no pre_tokenizer: only byte-level BPE files (a ByteLevel pre_tokenizer) are supported");
  add(spec, true);
}

HfPreTokenizer::~HfPreTokenizer() = default;

void HfPreTokenizer::add(const nlohmann::json& spec, bool last) {
  const std::string type = spec.value("type", "");
  if (type == "Sequence") {
    const auto& parts = spec.at("pretokenizers");
    for (size_t i = 0; i < parts.size(); ++i) add(parts[i], last && i + 1 == parts.size());
    return;
  }
  if (type == "ByteLevel") {
    if (!last)
      throw std::invalid_argument("ByteLevel must be the last pre_tokenizer (later steps would see byte-level text)");
    if (spec.value("add_prefix_space", false)) steps_.push_back({true, nullptr, Behavior::kIsolated, false});
    if (spec.value("use_regex", true)) steps_.push_back({false, compile(kGpt2Pattern, false), Behavior::kIsolated, false});
    return;
  }
  if (last)
    throw std::invalid_argument(fmt::format("the last pre_tokenizer is {}, not ByteLevel: only byte-level BPE files are "
                                            "supported (a SentencePiece-style file works as sentencepiece:PATH to its "
                                            ".model file)",
                                            type.empty() ? "untyped" : type));
  if (type == "Digits") {
    // Rust's char::is_numeric is \p{N}; each digit is its own match.
    const bool individual = spec.value("individual_digits", false);
    steps_.push_back({false, compile(R"(\p{N})", false), individual ? Behavior::kIsolated : Behavior::kContiguous, false});
    return;
  }
  if (type == "Split") {
    const auto& pattern = spec.at("pattern");
    std::shared_ptr<const UnicodeRegex> regex;
    if (pattern.contains("Regex"))
      regex = compile(pattern.at("Regex").get<std::string>(), false);
    else if (pattern.contains("String"))
      regex = compile(pattern.at("String").get<std::string>(), true);
    else
      throw std::invalid_argument("Split pattern must be {\"Regex\": ...} or {\"String\": ...}");
    const std::string behavior = spec.at("behavior").get<std::string>();
    Step step{false, regex, Behavior::kIsolated, spec.value("invert", false)};
    if (behavior == "Removed") step.behavior = Behavior::kRemoved;
    else if (behavior == "Isolated") step.behavior = Behavior::kIsolated;
    else if (behavior == "MergedWithPrevious") step.behavior = Behavior::kMergedWithPrevious;
    else if (behavior == "MergedWithNext") step.behavior = Behavior::kMergedWithNext;
    else if (behavior == "Contiguous") step.behavior = Behavior::kContiguous;
    else
      throw std::invalid_argument(fmt::format("unknown Split behavior '{}' (expected Removed, Isolated, "
                                              "MergedWithPrevious, MergedWithNext or Contiguous)",
                                              behavior));
    steps_.push_back(std::move(step));
    return;
  }
  throw std::invalid_argument(fmt::format("unsupported pre_tokenizer type '{}' (supported: ByteLevel, Split, Digits, "
                                          "Sequence)",
                                          type));
}

void HfPreTokenizer::split(std::string_view text, std::vector<std::string>& pieces) const {
  std::vector<std::string> current{std::string(text)}, next;
  for (const Step& step : steps_) {
    next.clear();
    for (const std::string& piece : current) apply(step, piece, next);
    current.swap(next);
  }
  for (auto& piece : current)
    if (!piece.empty()) pieces.push_back(std::move(piece));
}

void HfPreTokenizer::apply(const Step& step, const std::string& piece, std::vector<std::string>& out) {
  if (piece.empty()) return;
  if (step.prefix_space) {
    out.push_back(piece[0] == ' ' ? piece : " " + piece);
    return;
  }
  // Matches and the gaps between them, in order, as Hugging Face's find_matches lists them.
  struct Part {
    size_t begin, end;
    bool match;
  };
  std::vector<Part> parts;
  size_t covered = 0;
  for (const TextSpan& span : step.regex->find_all(piece)) {
    if (span.begin > covered) parts.push_back({covered, span.begin, false});
    parts.push_back({span.begin, span.end, true});
    covered = span.end;
  }
  if (covered < piece.size()) parts.push_back({covered, piece.size(), false});
  if (step.invert)
    for (auto& part : parts) part.match = !part.match;

  // Each behavior folds the parts into the spans of the new pieces.
  std::vector<std::pair<size_t, size_t>> spans;
  bool previous_match = false;
  switch (step.behavior) {
    case Behavior::kRemoved:
      for (const auto& part : parts)
        if (!part.match) spans.emplace_back(part.begin, part.end);
      break;
    case Behavior::kIsolated:
      for (const auto& part : parts) spans.emplace_back(part.begin, part.end);
      break;
    case Behavior::kContiguous:
      for (const auto& part : parts) {
        if (!spans.empty() && part.match == previous_match) spans.back().second = part.end;
        else spans.emplace_back(part.begin, part.end);
        previous_match = part.match;
      }
      break;
    case Behavior::kMergedWithPrevious:
      for (const auto& part : parts) {
        if (!spans.empty() && part.match && !previous_match) spans.back().second = part.end;
        else spans.emplace_back(part.begin, part.end);
        previous_match = part.match;
      }
      break;
    case Behavior::kMergedWithNext:
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        if (!spans.empty() && it->match && !previous_match) spans.back().first = it->begin;
        else spans.emplace_back(it->begin, it->end);
        previous_match = it->match;
      }
      std::reverse(spans.begin(), spans.end());
      break;
  }
  for (const auto& [begin, end] : spans)
    if (end > begin) out.push_back(piece.substr(begin, end - begin));
}

}  // namespace xtrain::data
