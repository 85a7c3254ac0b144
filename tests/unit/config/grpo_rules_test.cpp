// data.objective grpo's recipe keys (config/rules/grpo.cpp): the grpo section as read, and every
// refusal with its key, its place and its fix.
#include <catch2/catch.hpp>

#include "config/recipe_loader.h"

using GrpoLines = std::vector<std::string>;

namespace {

const std::string kGrpoRecipe = R"(name: g
model:
  hidden_size: 64
  num_layers: 2
  num_heads: 4
data:
  train: prompts.jsonl
  objective: grpo
  seq_len: 128
train:
  global_batch_size: 8
  micro_batch_size: 4
grpo:
  num_generations: 4
  max_new_tokens: 32
  rewards: [number_match, format]
  reward_weights: [1, 0.25]
  reward:
    format: '^<think>.*?</think>'
)";

GrpoLines grpo_problems(const std::string& text, std::vector<std::string> overrides = {}) {
  xtrain::config::LoadOptions options;
  options.check_files = false;  // prompts.jsonl is not there
  options.overrides = std::move(overrides);
  try {
    xtrain::config::load_recipe_text(text, "r.yaml", options);
  } catch (const xtrain::config::RecipeError& e) {
    GrpoLines lines;
    for (const auto& d : e.diagnostics()) lines.push_back(d.str());
    return lines;
  }
  return {"(loaded)"};
}

}  // namespace

TEST_CASE("grpo: the section reads as TRL's names, and a whole recipe loads", "[grpo_rules]") {
  xtrain::config::LoadOptions options;
  options.check_files = false;
  const auto recipe = xtrain::config::load_recipe_text(kGrpoRecipe, "r.yaml", options);
  CHECK(recipe.data.objective == xtrain::config::Objective::grpo);
  CHECK(recipe.grpo.num_generations == 4);
  CHECK(recipe.grpo.reward_weights == std::vector<double>{1, 0.25});
  CHECK(grpo_problems(kGrpoRecipe) == GrpoLines{"(loaded)"});
  CHECK(grpo_problems("name: c\n").front() == "(loaded)");  // the other objectives never meet these rules
}

TEST_CASE("grpo: rewards, their settings and the rollout batch are refused with the fix", "[grpo_rules]") {
  CHECK(grpo_problems(kGrpoRecipe, {"grpo.rewards=[number_match,numbermatch]"}) ==
        GrpoLines{"--set grpo.rewards=[number_match,numbermatch]: grpo.rewards: must be one of exact_match, number_match, "
              "format, overlong, command, got 'numbermatch' (did you mean number_match?)"});
  CHECK(grpo_problems(kGrpoRecipe, {"grpo.rewards=[format,format]"}) ==
        GrpoLines{"--set grpo.rewards=[format,format]: grpo.rewards: 'format' is listed twice: list each reward once and "
              "weigh it with grpo.reward_weights"});
  CHECK(grpo_problems(kGrpoRecipe, {"grpo.rewards=[number_match,format,command]"}) ==
        GrpoLines{"r.yaml:17:3: grpo.reward_weights: 2 weights for 3 rewards: give one weight per entry of "
              "grpo.rewards, or none for 1 each",
              "r.yaml: grpo.reward.command: grpo.rewards lists command: set grpo.reward.command to the program that "
              "scores the completions (docs/post-training.md)"});
  CHECK(grpo_problems(kGrpoRecipe, {"grpo.rewards=[number_match,overlong]", "grpo.reward.overlong_cache=40"}) ==
        GrpoLines{"r.yaml:19:5: grpo.reward.format: grpo.rewards does not list format: add format to grpo.rewards, or "
              "leave this out",
              "--set grpo.reward.overlong_cache=40: grpo.reward.overlong_cache: 40 tokens is more than "
              "grpo.max_new_tokens 32: the punishment starts at max_new_tokens less this, so set at most 32"});
  CHECK(grpo_problems(kGrpoRecipe, {"grpo.reward.format=(<think>"}) ==
        GrpoLines{"--set grpo.reward.format=(<think>: grpo.reward.format: the pattern does not compile: regex error at "
              "offset 8: missing closing parenthesis: fix the regular expression"});
  CHECK(grpo_problems(kGrpoRecipe, {"grpo.num_generations=3"}) ==
        GrpoLines{"--set grpo.num_generations=3: grpo.num_generations: a rollout batch of 8 completions "
              "(train.global_batch_size 8 x grpo.steps_per_rollout 1) does not hold whole groups of 3: make "
              "train.global_batch_size x grpo.steps_per_rollout a multiple of grpo.num_generations"});
  CHECK(grpo_problems(kGrpoRecipe, {"grpo.num_generations=3", "grpo.steps_per_rollout=3", "grpo.max_new_tokens=128"}) ==
        GrpoLines{"--set grpo.max_new_tokens=128: grpo.max_new_tokens: 128 tokens leave no room for a prompt in "
              "data.seq_len 128: lower it, or raise data.seq_len"});
  CHECK(grpo_problems(kGrpoRecipe, {"grpo.num_generations=1"}) ==
        GrpoLines{"--set grpo.num_generations=1: grpo.num_generations: must be >= 2, got 1"});
}

TEST_CASE("grpo: data and layouts it does not run on are refused", "[grpo_rules]") {
  CHECK(grpo_problems(kGrpoRecipe, {"data.train=prompts.txt", "data.pack=true", "parallel.tp=2"}) ==
        GrpoLines{"--set data.train=prompts.txt: data.train: data.objective grpo reads one .jsonl file of {\"prompt\", "
              "\"answer\"} records (docs/post-training.md)",
              "--set data.pack=true: data.pack: data.objective grpo pads each completion to its own row: set data.pack "
              "false",
              "--set parallel.tp=2: parallel.tp: data.objective grpo runs on data, fully sharded and expert "
              "parallelism only: set parallel.tp 1"});
  CHECK(grpo_problems(kGrpoRecipe, {"model.family=bert"}).front() ==
        "--set model.family=bert: model.family: bert is an encoder trained on masked tokens: set data.objective mlm");
}
