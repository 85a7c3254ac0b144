// GRPO's rewards: the built-in ones (format and overlong against TRL's think_format_reward and
// get_soft_overlong_punishment, run through tools/reference/grpo_rewards_trl.py), the weighted
// sum, and grpo.reward.command as real processes: a Python scorer, and programs that fail,
// hang, or write the wrong output.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "train/rewards.h"
#include "util/input_error.h"

#include <catch2/catch.hpp>
#include "scratch_dir.h"

using namespace xtrain;

namespace {

train::RewardInput completion(std::string text, std::string answer = "", int64_t tokens = 0) {
  train::RewardInput input;
  input.prompt_json = "\"What is 6*7?\"";
  input.completion = std::move(text);
  input.has_answer = !answer.empty();
  input.answer = std::move(answer);
  input.completion_tokens = tokens;
  input.where = "prompts.jsonl:3";
  return input;
}

train::RewardSet rewards(std::vector<train::RewardTerm> terms, std::string command = "", double timeout_s = 10) {
  train::RewardSettings settings;
  settings.terms = std::move(terms);
  settings.format = "^<think>(?!.*<think>)(.*?)</think>.*$";  // TRL's think_format_reward
  settings.max_completion_tokens = 20;
  settings.overlong_cache = 8;
  settings.command = {std::move(command), timeout_s};
  return train::RewardSet(std::move(settings));
}

std::string refusal(const train::RewardSet& set, const std::vector<train::RewardInput>& inputs) {
  try {
    set.score(inputs);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

const char* kContract =
    "it reads one {\"prompt\", \"completion\", \"answer\"} JSON line per completion on stdin and writes one number per "
    "line on stdout, in the same order (docs/post-training.md)";

}  // namespace

TEST_CASE("rewards: exact and number matches, the weighted sum", "[train][grpo]") {
  double value = 0;
  CHECK(train::last_number("so 1,234.5 and then -7 apples", value));
  CHECK(value == -7);
  CHECK(train::last_number("total: 1,234.50.", value));
  CHECK(value == 1234.5);
  CHECK_FALSE(train::last_number("none here", value));
  const std::vector<train::RewardInput> inputs = {completion("The answer is 42.", "42"),
                                                  completion(" 42\n", "42"),
                                                  completion("I think 41, no, 42.0", "#### 42"),
                                                  completion("42 or 43", "42")};
  const auto scored = rewards({{"exact_match", 1.0}, {"number_match", 0.5}}).score(inputs);
  REQUIRE(scored.terms.size() == 2);
  CHECK(scored.terms[0] == std::vector<double>{0, 1, 0, 0});
  CHECK(scored.terms[1] == std::vector<double>{1, 1, 1, 0});
  CHECK(scored.total == std::vector<double>{0.5, 1.5, 0.5, 0});
  CHECK(refusal(rewards({{"number_match", 1}}), {completion("42", "forty-two")}) ==
        "prompts.jsonl:3: \"answer\" is 'forty-two', which holds no number, and grpo.rewards number_match compares "
        "numbers: write the answer as a number, or use exact_match");
  CHECK(refusal(rewards({{"exact_match", 1}}), {completion("42")}) ==
        "prompts.jsonl:3: the record has no \"answer\", and grpo.rewards exact_match compares each completion to it: "
        "add \"answer\" to every record, or take exact_match out of grpo.rewards");
}

TEST_CASE("rewards: format and overlong equal TRL's think_format_reward and soft overlong punishment",
          "[train][grpo]") {
  testing::ScratchDir dir;
  const std::vector<std::pair<std::string, int64_t>> cases = {
      {"<think>\nreasoning\n</think>\nanswer", 3},  {"<think>\nno end tag\nanswer", 12},
      {"answer first <think>x</think>", 13},       {"<think>a</think><think>b</think>", 16},
      {"<think></think>", 20},                     {"\n<think>x</think>", 21},
      {"<think>é\n\n</think>ü", 12}};
  std::vector<train::RewardInput> inputs;
  std::string lines;
  for (const auto& [text, tokens] : cases) {
    inputs.push_back(completion(text, "", tokens));
    lines += nlohmann::json{{"completion", text}, {"tokens", tokens}}.dump() + "\n";
  }
  const auto file = dir.write("completions.jsonl", lines);
  const auto command = fmt::format("{} {}/tools/reference/grpo_rewards_trl.py {} 20 8 2>/dev/null", XTRAIN_PYTHON,
                                   XTRAIN_SOURCE_DIR, file);
  std::FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::vector<double> trl_format, trl_overlong;
  double f = 0, o = 0;
  while (std::fscanf(pipe, "%lf %lf", &f, &o) == 2) trl_format.push_back(f), trl_overlong.push_back(o);
  REQUIRE(::pclose(pipe) == 0);
  const auto scored = rewards({{"format", 1}, {"overlong", 1}}).score(inputs);
  CHECK(scored.terms[0] == trl_format);
  CHECK(scored.terms[1] == trl_overlong);
  // What TRL gives, so a change on either side shows here too.
  CHECK(trl_format == std::vector<double>{1, 0, 0, 0, 1, 0, 1});
  CHECK(trl_overlong == std::vector<double>{0, 0, -0.125, -0.5, -1, -1, 0});
  CHECK_THROWS_WITH(rewards({{"format", 1}, {"bleu", 1}}), "grpo.rewards: 'bleu' is not a reward: use exact_match, "
                                                             "number_match, format, overlong, command");
}

TEST_CASE("rewards: grpo.reward.command scores through a real program", "[train][grpo]") {
  testing::ScratchDir dir;
  // Length of the completion, plus 10 where it holds the answer, plus 100 for a prompt of messages.
  const auto script = dir.write("score.py",
                                "import json, sys\n"
                                "for line in sys.stdin:\n"
                                "    r = json.loads(line)\n"
                                "    bonus = 10 if r['answer'] is not None and r['answer'] in r['completion'] else 0\n"
                                "    bonus += 100 if isinstance(r['prompt'], list) else 0\n"
                                "    print(len(r['completion']) + bonus)\n");
  auto messages = completion("42!", "42");
  messages.prompt_json = "[{\"role\": \"user\", \"content\": \"6*7?\"}]";
  std::vector<train::RewardInput> inputs = {completion("no", "42"), completion("é 42", "42"), completion("x"),
                                            messages};
  // Enough text that the program must read while xtrain writes (more than a pipe holds).
  for (int i = 0; i < 400; ++i) inputs.push_back(completion(std::string(500, 'a'), "b"));
  const auto scored = rewards({{"command", 2.0}, {"exact_match", 1.0}},
                              fmt::format("{} {}", XTRAIN_PYTHON, script))
                          .score({inputs.begin(), inputs.begin() + 2});
  CHECK(scored.terms[0] == std::vector<double>{2, 14});  // len("é 42") is 4 characters
  CHECK(scored.total == std::vector<double>{4, 28});
  const auto many = rewards({{"command", 1.0}}, fmt::format("{} {}", XTRAIN_PYTHON, script)).score(inputs);
  REQUIRE(many.total.size() == inputs.size());
  CHECK(many.total[2] == 1);
  CHECK(many.total[3] == 113);
  CHECK(many.total[403] == 500);
  // A program that never reads stdin and answers anyway: the rewards it wrote count.
  std::string ones;
  for (size_t i = 0; i < inputs.size(); ++i) ones += "1\\n";
  CHECK(rewards({{"command", 1}}, "printf '" + ones + "'").score(inputs).total.back() == 1);
}

TEST_CASE("rewards: a failing, hanging or miscounting grpo.reward.command is named with the fix", "[train][grpo]") {
  testing::ScratchDir dir;
  const std::vector<train::RewardInput> three = {completion("a", "1"), completion("b", "1"), completion("c", "1")};
  auto refused = [&](const std::string& command, double timeout_s = 10) {
    return refusal(rewards({{"command", 1}}, command, timeout_s), three);
  };
  CHECK(refused("cat > /dev/null; echo 'no model here' >&2; exit 3") ==
        fmt::format("grpo.reward.command 'cat > /dev/null; echo 'no model here' >&2; exit 3': exited with status 3 "
                    "(its stderr: no model here): fix the program so that it exits 0: {}",
                    kContract));
  CHECK(refused("cat > /dev/null; echo 1; echo 2") ==
        fmt::format("grpo.reward.command 'cat > /dev/null; echo 1; echo 2': it wrote 2 rewards for 3 completions: fix "
                    "the program: {}",
                    kContract));
  CHECK(refused("cat > /dev/null; printf '1\\n\\nnope\\n1\\n'") ==
        fmt::format("grpo.reward.command 'cat > /dev/null; printf '1\\n\\nnope\\n1\\n'': line 3 of its output is "
                    "'nope', not a finite number: fix the program: {}",
                    kContract));
  CHECK_THAT(refused("cat > /dev/null; echo nan; echo 1; echo 1"), Catch::Contains("line 1 of its output is 'nan'"));
  CHECK_THAT(refused("kill -SEGV $$"), Catch::Contains("': killed by signal 11 (Segmentation fault): fix the program"));
  CHECK_THAT(refused("no-such-scorer-xyz"),
             Catch::Contains("': exited with status 127 (its stderr: sh: 1: no-such-scorer-xyz: not found)"));

  // A hang: the program and what it started are killed at the limit.
  const auto pid_file = (dir.path() / "child.pid").string();
  const auto start = std::chrono::steady_clock::now();
  const auto hang = fmt::format("sleep 60 & echo $! > {}; cat > /dev/null; wait", pid_file);
  CHECK(refused(hang, 0.5) ==
        fmt::format("grpo.reward.command '{}': still running after grpo.reward.timeout_s 0.5 s, so it and its process "
                    "group were killed: make the program finish sooner (it scores a whole rollout batch per call), or "
                    "raise grpo.reward.timeout_s",
                    hang));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(seconds < 3);
  pid_t child = 0;
  std::ifstream(pid_file) >> child;
  REQUIRE(child > 0);
  bool gone = false;  // killed: no such process, or a zombie its new parent has not reaped yet
  for (int i = 0; i < 200 && !gone; ++i) {
    std::string stat;
    std::getline(std::ifstream(fmt::format("/proc/{}/stat", child)), stat);
    gone = stat.empty() || stat.find(") Z") != std::string::npos;
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(gone);
}
