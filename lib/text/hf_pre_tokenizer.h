// HfPreTokenizer: the `pre_tokenizer` of a byte-level Hugging Face tokenizer.json, which cuts a
// text segment into the pieces that BPE merges separately. Supported: ByteLevel
// (add_prefix_space, use_regex with GPT-2's pattern), Split (Regex or String pattern, every
// behavior, invert), Digits, and a Sequence of these ending in ByteLevel, as GPT-2, Llama 3,
// Qwen2 and DeepSeek files have. Regexes follow Oniguruma's conventions where PCRE2's differ
// (^ and $ match at line breaks). Pieces are raw bytes: the byte-level spelling is applied to
// the vocabulary instead of to the text. Pieces stream out one at a time, so a large document
// costs no list of pieces.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace xtrain::text {

class UnicodeRegex;

class HfPreTokenizer {
 public:
  // Throws std::invalid_argument saying what is unsupported or malformed.
  explicit HfPreTokenizer(const nlohmann::json& spec);
  ~HfPreTokenizer();

  using PieceConsumer = std::function<void(std::string_view)>;
  // Calls consume for each non-empty piece of `text`, in order.
  void split(std::string_view text, const PieceConsumer& consume) const;

 private:
  enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };
  struct Step {
    bool prefix_space = false;  // ByteLevel's add_prefix_space; otherwise a split
    std::shared_ptr<const UnicodeRegex> regex;
    Behavior behavior = Behavior::kIsolated;
    bool invert = false;
  };
  void add(const nlohmann::json& spec, bool last);
  // Applies steps_[step..] to `piece`.
  void run(size_t step, std::string_view piece, const PieceConsumer& consume) const;

  std::vector<Step> steps_;
};

}  // namespace xtrain::text
