// The rewards of GRPO (grpo.rewards, grpo.reward_weights): each completion's reward is the
// weighted sum of the listed rewards' values (TRL's reward_weights, its nansum with no value
// missing). The built-in ones are verifiable, computed from the completion's text and the prompt
// record's answer:
//   exact_match   1 when the completion, trimmed of surrounding whitespace, equals the answer so
//                 trimmed, else 0
//   number_match  1 when the last number in the completion (-12, 3.5, 1,234) equals the answer's
//                 number (the answer itself, or the last number in it, as GSM8K's "#### 72")
//                 within 1e-6 of the answer's magnitude (at least 1), else 0; 0 for none
//   format        1 when grpo.reward.format matches at the completion's start (Python's re.match
//                 with DOTALL and MULTILINE, as TRL's think_format_reward; end it with $ to ask
//                 for the whole completion), else 0
//   overlong      DAPO's soft overlong punishment on the completion's token count L (TRL's
//                 get_soft_overlong_punishment): 0 up to max - cache, then falling linearly to -1
//                 at max, -1 beyond
//   command       grpo.reward.command's number (train/reward_command.h)
// An answer that number_match cannot read, or that exact_match and number_match need and the
// record lacks, is an InputError naming the record.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "train/reward_command.h"

namespace xtrain::train {

struct RewardTerm {
  std::string name;  // exact_match, number_match, format, overlong or command
  double weight = 1;
};

struct RewardSettings {
  std::vector<RewardTerm> terms;
  std::string format;                  // format's pattern (PCRE2, Python's re dialect)
  int64_t max_completion_tokens = 0;   // overlong's max (grpo.max_new_tokens)
  int64_t overlong_cache = 0;          // overlong's cache (grpo.reward.overlong_cache)
  RewardCommand command;
};

struct RewardInput {
  std::string prompt_json;  // the record's "prompt" as JSON
  std::string completion;   // decoded text
  std::string answer;
  bool has_answer = false;
  int64_t completion_tokens = 0;
  std::string where;        // the record's file:line, for errors
};

struct Rewards {
  std::vector<double> total;               // [completions]: the weighted sum
  std::vector<std::vector<double>> terms;  // [terms][completions]: each reward's own value
};

// The names grpo.rewards may list.
const std::vector<std::string>& reward_names();

// The last number in text (commas between digits dropped); false where there is none.
bool last_number(const std::string& text, double& value);

class RewardSet {
 public:
  // InputError for an unknown name or a format pattern that does not compile.
  explicit RewardSet(RewardSettings settings);
  ~RewardSet();
  RewardSet(RewardSet&&) noexcept;

  Rewards score(const std::vector<RewardInput>& inputs) const;
  const RewardSettings& settings() const { return settings_; }

 private:
  std::vector<double> builtin(const std::string& name, const std::vector<RewardInput>& inputs) const;
  double format_reward(const std::string& completion) const;

  RewardSettings settings_;
  struct Pattern;
  std::unique_ptr<Pattern> pattern_;
};

}  // namespace xtrain::train
