#include "train/rewards.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "config/recipe_choices.h"
#include "util/input_error.h"

namespace xtrain::train {

struct RewardSet::Pattern {
  pcre2_code* code = nullptr;
  ~Pattern() { pcre2_code_free(code); }
};

namespace {

std::string trimmed(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\r\n") + 1 - first);
}

bool digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

void need_answer(const RewardInput& input, const std::string& name) {
  if (!input.has_answer)
    throw InputError(fmt::format("{}: the record has no \"answer\", and grpo.rewards {} compares each completion to "
                                 "it: add \"answer\" to every record, or take {} out of grpo.rewards",
                                 input.where, name, name));
}

double number_match(const RewardInput& input) {
  need_answer(input, "number_match");
  double answer = 0;
  if (!last_number(input.answer, answer))
    throw InputError(fmt::format("{}: \"answer\" is '{}', which holds no number, and grpo.rewards number_match "
                                 "compares numbers: write the answer as a number, or use exact_match",
                                 input.where, input.answer));
  double completion = 0;
  if (!last_number(input.completion, completion)) return 0;
  return std::abs(completion - answer) <= 1e-6 * std::max(1.0, std::abs(answer)) ? 1 : 0;
}

// TRL's _SoftOverlongPunishment: Eq. (13) of the DAPO paper.
double overlong(int64_t tokens, int64_t max, int64_t cache) {
  if (tokens <= max - cache) return 0;
  if (tokens <= max) return static_cast<double>(max - cache - tokens) / static_cast<double>(cache);
  return -1;
}

}  // namespace

const std::vector<std::string>& reward_names() {
  static const std::vector<std::string> names = util::choice_names<config::GrpoReward>();
  return names;
}

bool last_number(const std::string& text, double& value) {
  bool found = false;
  for (size_t i = 0; i < text.size();) {
    if (!digit(text[i])) {
      ++i;
      continue;
    }
    std::string number = i > 0 && text[i - 1] == '-' ? "-" : "";
    while (i < text.size() && (digit(text[i]) || (text[i] == ',' && i + 1 < text.size() && digit(text[i + 1]) &&
                                                  i > 0 && digit(text[i - 1])))) {
      if (text[i] != ',') number += text[i];
      ++i;
    }
    if (i + 1 < text.size() && text[i] == '.' && digit(text[i + 1])) {
      number += text[i++];
      while (i < text.size() && digit(text[i])) number += text[i++];
    }
    value = std::strtod(number.c_str(), nullptr);
    found = true;
  }
  return found;
}

RewardSet::RewardSet(RewardSettings settings) : settings_(std::move(settings)) {
  for (const auto& term : settings_.terms) {
    const auto& names = reward_names();
    if (std::find(names.begin(), names.end(), term.name) == names.end())
      throw InputError(fmt::format("grpo.rewards: '{}' is not a reward: use {}", term.name, fmt::join(names, ", ")));
    if (term.name != "format" || pattern_) continue;
    int error = 0;
    PCRE2_SIZE offset = 0;
    pattern_ = std::make_unique<Pattern>();
    pattern_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(settings_.format.data()), settings_.format.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOTALL | PCRE2_MULTILINE,
                                   &error, &offset, nullptr);
    if (!pattern_->code) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof message);
      throw InputError(fmt::format("grpo.reward.format: the pattern does not compile at offset {}: {}: fix the "
                                   "regular expression (Python's re dialect)",
                                   offset, reinterpret_cast<const char*>(message)));
    }
  }
}

RewardSet::~RewardSet() = default;
RewardSet::RewardSet(RewardSet&&) noexcept = default;

double RewardSet::format_reward(const std::string& completion) const {
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
      pcre2_match_data_create_from_pattern(pattern_->code, nullptr), &pcre2_match_data_free);
  const int rc = pcre2_match(pattern_->code, reinterpret_cast<PCRE2_SPTR>(completion.data()), completion.size(), 0,
                             PCRE2_ANCHORED, match.get(), nullptr);
  return rc >= 0 ? 1 : 0;
}

std::vector<double> RewardSet::builtin(const std::string& name, const std::vector<RewardInput>& inputs) const {
  std::vector<double> values;
  for (const auto& input : inputs) {
    if (name == "exact_match") {
      need_answer(input, name);
      values.push_back(trimmed(input.completion) == trimmed(input.answer) ? 1 : 0);
    } else if (name == "number_match") {
      values.push_back(number_match(input));
    } else if (name == "format") {
      values.push_back(format_reward(input.completion));
    } else {
      values.push_back(overlong(input.completion_tokens, settings_.max_completion_tokens, settings_.overlong_cache));
    }
  }
  return values;
}

Rewards RewardSet::score(const std::vector<RewardInput>& inputs) const {
  Rewards out;
  out.total.assign(inputs.size(), 0.0);
  for (const auto& term : settings_.terms) {
    std::vector<double> values;
    if (term.name == "command") {
      std::vector<CommandInput> command_inputs;
      for (const auto& input : inputs)
        command_inputs.push_back({input.prompt_json, input.completion, input.answer, input.has_answer});
      values = run_reward_command(settings_.command, command_inputs);
    } else {
      values = builtin(term.name, inputs);
    }
    for (size_t i = 0; i < inputs.size(); ++i) out.total[i] += term.weight * values[i];
    out.terms.push_back(std::move(values));
  }
  return out;
}

}  // namespace xtrain::train
