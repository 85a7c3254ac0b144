// The external reward of GRPO (grpo.reward.command): a program that scores completions. It runs
// as `/bin/sh -c COMMAND` in xtrain's working directory, in a process group of its own, reads one
// JSON object {"prompt": ..., "completion": "...", "answer": ...} a line on stdin (the prompt as
// the record wrote it, a string or messages; the answer a string, or null where the record has
// none) and writes one finite number a line on stdout, in the same order; blank lines are skipped
// and stderr is kept for the error message. Whatever goes wrong (the program cannot start, exits
// non-zero or by a signal, is still running at the time limit, writes another count of rewards
// or a line that is not a number) is an InputError naming grpo.reward.command, the command, what
// happened and the fix; at the limit the whole process group is killed first, so nothing of it
// outlives the call.
#pragma once
#include <string>
#include <vector>

namespace xtrain::train {

struct RewardCommand {
  std::string command;     // grpo.reward.command
  double timeout_s = 60;   // grpo.reward.timeout_s: from the start to the program's exit
};

struct CommandInput {
  std::string prompt_json;  // a JSON value: the record's "prompt"
  std::string completion;
  std::string answer;
  bool has_answer = false;
};

std::vector<double> run_reward_command(const RewardCommand& command, const std::vector<CommandInput>& inputs);

}  // namespace xtrain::train
