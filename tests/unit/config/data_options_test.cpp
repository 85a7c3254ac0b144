#include <catch2/catch.hpp>

#include "config/recipe_loader.h"
#include "config/recipe_problems.h"

using namespace xtrain::config;

using xtrain::testing::problems;

TEST_CASE("data.train: a single source or a weighted list, which a dumped recipe keeps", "[config]") {
  const auto recipe = load_recipe_text(
      "name: x\n"
      "data:\n"
      "  train:\n"
      "    - {path: builtin:demo, weight: 3}\n"
      "    - path: builtin:demo-eval\n"
      "      weight: 0.5\n",
      "r.yaml");
  CHECK(recipe.data.train == "[{path: builtin:demo, weight: 3}, {path: builtin:demo-eval, weight: 0.5}]");
  const std::string dumped = dump_recipe(recipe);
  CHECK_THAT(dumped, Catch::Contains("  train: [{path: builtin:demo, weight: 3}, {path: builtin:demo-eval, weight: 0.5}]\n"));
  CHECK(load_recipe_text(dumped, "dump.yaml").data.train == recipe.data.train);

  LoadOptions set;
  set.overrides = {"data.eval=[{path: builtin:demo-eval}]", "data.chat_template=llama3"};
  const auto overridden = load_recipe_text("name: x\n", "r.yaml", set);
  CHECK(overridden.data.eval == "[{path: builtin:demo-eval, weight: 1}]");
  CHECK(overridden.data.chat_template == "llama3");
  CHECK(load_recipe_text("name: x\n", "r.yaml").data.train == "builtin:demo");
  CHECK(load_recipe_text("name: x\n", "r.yaml").data.chat_template == "chatml");
}

TEST_CASE("data.train lists and data.chat_template: problems point at the value", "[config]") {
  CHECK(problems("name: x\ndata:\n  train: [{path: builtin:demo, weight: -1}]\n") ==
        std::vector<std::string>{
            "r.yaml:3:10: data.train: source 1: weight must be a positive number, got '-1'"});
  CHECK(problems("name: x\ndata:\n  train: [{path: builtin:demo}, {path: /nonexistent.jsonl}]\n") ==
        std::vector<std::string>{"r.yaml:3:3: data.train: source 2: file not found: /nonexistent.jsonl"});
  CHECK(problems("name: x\ndata:\n  train: {path: builtin:demo}\n") ==
        std::vector<std::string>{
            "r.yaml:3:10: data.train: expected a source or a list of {path: SOURCE, weight: NUMBER}, got a mapping"});
  CHECK(problems("name: x\ndata:\n  train: megatron:/nonexistent/web\n") ==
        std::vector<std::string>{
            "r.yaml:3:3: data.train: file not found: /nonexistent/web.idx (of megatron:/nonexistent/web)"});
  const auto chat = problems("name: x\ndata:\n  chat_template: vicuna\n");
  REQUIRE(chat.size() == 1);
  CHECK_THAT(chat[0], Catch::StartsWith("r.yaml:3:18: data.chat_template: unknown chat template 'vicuna'"));
}
