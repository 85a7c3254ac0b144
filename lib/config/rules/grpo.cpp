// GRPO samples grpo.num_generations completions of each prompt and scores them with grpo.rewards
// (docs/post-training.md): the rewards' own settings must be there for the rewards listed (and
// only for them), a rollout batch must hold whole groups, and a prompt must leave room for its
// completion. Like dpo, it runs on data, fully sharded and expert parallelism only.
#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "config/recipe_rule.h"
#include "text/unicode_regex.h"

namespace xtrain::config::rules {

namespace {

bool listed(const Recipe& r, const char* reward) {
  return std::find(r.grpo.rewards.begin(), r.grpo.rewards.end(), reward) != r.grpo.rewards.end();
}

// A list its own check refused stays empty: the rules that count it would only echo that.
bool refused_already(const RuleContext& c, const char* key) {
  const auto& found = c.report.diagnostics();
  return std::any_of(found.begin(), found.end(), [&](const Diagnostic& d) { return d.key == key; });
}

void layout_rules(const RuleContext& c) {
  const auto& r = c.recipe;
  if (r.data.train.size() < 6 || r.data.train.compare(r.data.train.size() - 6, 6, ".jsonl") != 0)
    c.refuse("data.train", "data.objective grpo reads one .jsonl file of {\"prompt\", \"answer\"} records "
                           "(docs/post-training.md)");
  if (!r.data.eval.empty()) c.refuse("data.eval", "data.objective grpo has no evaluation yet: leave data.eval empty");
  if (r.data.pack) c.refuse("data.pack", "data.objective grpo pads each completion to its own row: set data.pack false");
  if (r.data.balance_window != 0)
    c.refuse("data.balance_window", "data.objective grpo keeps each prompt's group together: set data.balance_window 0");
  const std::pair<const char*, int64_t> layouts[] = {{"parallel.tp", r.parallel.tp},
                                                     {"parallel.pp", r.parallel.pp},
                                                     {"parallel.cp", r.parallel.cp}};
  for (const auto& [key, degree] : layouts)
    if (degree != 1)
      c.refuse(key, fmt::format("data.objective grpo runs on data, fully sharded and expert parallelism only: set {} 1",
                                key));
  if (r.model.mtp_layers > 0) c.refuse("model.mtp_layers", "data.objective grpo has no multi-token prediction: set 0");
  if (r.model.vision.enabled())
    c.refuse("model.init_from", "data.objective grpo samples text completions of text prompts, and this model reads "
                                "images: start from a text-only model");
}

void reward_rules(const RuleContext& c) {
  const auto& g = c.recipe.grpo;
  if (refused_already(c, "grpo.rewards")) return;
  if (g.rewards.empty())
    c.refuse("grpo.rewards", "data.objective grpo needs at least one reward: list them, e.g. [number_match, format] "
                             "(exact_match, number_match, format, overlong, command)");
  if (!g.reward_weights.empty() && g.reward_weights.size() != g.rewards.size())
    c.refuse("grpo.reward_weights",
             fmt::format("{} weights for {} rewards: give one weight per entry of grpo.rewards, or none for 1 each",
                         g.reward_weights.size(), g.rewards.size()));
  if (listed(c.recipe, "format") && g.reward.format.empty())
    c.refuse("grpo.reward.format", "grpo.rewards lists format: set grpo.reward.format to the pattern a completion "
                                   "should match, e.g. '^<think>.*?</think>.*$'");
  if (!listed(c.recipe, "format") && !g.reward.format.empty())
    c.refuse("grpo.reward.format", "grpo.rewards does not list format: add format to grpo.rewards, or leave this out");
  if (!g.reward.format.empty()) {
    try {
      text::UnicodeRegex pattern(g.reward.format);
    } catch (const std::invalid_argument& e) {
      c.refuse("grpo.reward.format", fmt::format("the pattern does not compile: {}: fix the regular expression", e.what()));
    }
  }
  if (listed(c.recipe, "command") && g.reward.command.empty())
    c.refuse("grpo.reward.command", "grpo.rewards lists command: set grpo.reward.command to the program that scores "
                                    "the completions (docs/post-training.md)");
  if (!listed(c.recipe, "command") && !g.reward.command.empty())
    c.refuse("grpo.reward.command", "grpo.rewards does not list command: add command to grpo.rewards, or leave this out");
  if (listed(c.recipe, "overlong") && g.reward.overlong_cache > g.max_new_tokens)
    c.refuse("grpo.reward.overlong_cache",
             fmt::format("{} tokens is more than grpo.max_new_tokens {}: the punishment starts at max_new_tokens less "
                         "this, so set at most {}",
                         g.reward.overlong_cache, g.max_new_tokens, g.max_new_tokens));
}

}  // namespace

void grpo(const RuleContext& c) {
  const auto& r = c.recipe;
  if (r.data.objective != Objective::grpo) return;
  layout_rules(c);
  reward_rules(c);
  const auto& g = r.grpo;
  if (g.max_new_tokens >= r.data.seq_len)
    c.refuse("grpo.max_new_tokens",
             fmt::format("{} tokens leave no room for a prompt in data.seq_len {}: lower it, or raise data.seq_len",
                         g.max_new_tokens, r.data.seq_len));
  const int64_t completions = r.train.global_batch_size * g.steps_per_rollout;
  if (completions % g.num_generations != 0)
    c.refuse("grpo.num_generations",
             fmt::format("a rollout batch of {} completions (train.global_batch_size {} x grpo.steps_per_rollout {}) "
                         "does not hold whole groups of {}: make train.global_batch_size x grpo.steps_per_rollout a "
                         "multiple of grpo.num_generations",
                         completions, r.train.global_batch_size, g.steps_per_rollout, g.num_generations));
}

}  // namespace xtrain::config::rules
