#include "text/hf_pre_tokenizer.h"

#include <optional>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "text/unicode_regex.h"

namespace xtrain::text {

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

void HfPreTokenizer::split(std::string_view text, const PieceConsumer& consume) const { run(0, text, consume); }

void HfPreTokenizer::run(size_t index, std::string_view piece, const PieceConsumer& consume) const {
  if (piece.empty()) return;
  if (index == steps_.size()) {
    consume(piece);
    return;
  }
  const Step& step = steps_[index];
  if (step.prefix_space) {
    if (piece[0] == ' ') {
      run(index + 1, piece, consume);
    } else {
      const std::string spaced = " " + std::string(piece);
      run(index + 1, spaced, consume);
    }
    return;
  }

  // The regex yields matches; with the gaps between them they are Hugging Face's "parts".
  // Each behavior folds the parts into pieces, in one forward pass with one part held back.
  struct Part {
    size_t begin, end;
    bool match;
  };
  auto emit = [&](size_t begin, size_t end) { run(index + 1, piece.substr(begin, end - begin), consume); };
  std::optional<Part> held;     // the piece being built, not yet emitted
  bool previous_match = false;  // whether the part before this one was a match
  auto take = [&](Part part) {
    if (step.invert) part.match = !part.match;
    const bool after_match = previous_match;
    previous_match = part.match;
    switch (step.behavior) {
      case Behavior::kRemoved:
        if (!part.match) emit(part.begin, part.end);
        return;
      case Behavior::kIsolated:
        emit(part.begin, part.end);
        return;
      case Behavior::kContiguous:  // runs of matches (or of gaps) join
        if (held && part.match == after_match) {
          held->end = part.end;
          return;
        }
        break;
      case Behavior::kMergedWithPrevious:  // a match joins the gap before it
        if (held && part.match && !after_match) {
          held->end = part.end;
          return;
        }
        break;
      case Behavior::kMergedWithNext:  // a match joins the gap after it
        if (held && after_match && !part.match) {
          emit(held->begin, part.end);
          held.reset();
          return;
        }
        break;
    }
    if (held) emit(held->begin, held->end);
    held = part;
  };
  size_t covered = 0;
  step.regex->for_each_match(piece, [&](TextSpan match) {
    if (match.begin > covered) take({covered, match.begin, false});
    take({match.begin, match.end, true});
    covered = match.end;
  });
  if (covered < piece.size()) take({covered, piece.size(), false});
  if (held) emit(held->begin, held->end);
}

}  // namespace xtrain::text
