// model.lora's recipe rules (config/rules/lora.cpp): the nested mapping, and every refusal.
#include <catch2/catch.hpp>

#include "config/recipe_loader.h"
#include "recipe_problems.h"

namespace {
const std::string kRecipe = R"(name: t
model:
  hidden_size: 64
  num_layers: 2
  num_heads: 4
  lora:
    rank: 4
    alpha: 8
    targets: [q_proj, v_proj]
)";
}

TEST_CASE("model.lora reads as a nested mapping", "[lora_rules]") {
  const auto recipe = xtrain::config::load_recipe_text(kRecipe, "r.yaml", {});
  CHECK(recipe.model.lora.rank == 4);
  CHECK(recipe.model.lora.alpha == 8.0);
  CHECK(recipe.model.lora.targets == std::vector<std::string>{"q_proj", "v_proj"});
  CHECK(xtrain::testing::problems(kRecipe).empty());
}

TEST_CASE("model.lora refuses what it cannot train, naming the key", "[lora_rules]") {
  using xtrain::testing::problems;
  CHECK(problems(kRecipe, {"model.lora.targets=[q_proj,qproj]"}) ==
        std::vector<std::string>{"--set model.lora.targets=[q_proj,qproj]: model.lora.targets: 'qproj' names no "
                                 "module of model.family llama; its modules are q_proj, k_proj, v_proj, o_proj, "
                                 "gate_proj, up_proj, down_proj"});
  CHECK(problems(kRecipe, {"model.lora.rank=0"}) ==
        std::vector<std::string>{"--set model.lora.rank=0: model.lora.rank: must be >= 1, got 0"});
  CHECK(problems(kRecipe, {"model.lora.dropout=0.05"}).empty());
  CHECK(problems(kRecipe, {"model.lora.dropout=1"}) ==
        std::vector<std::string>{"--set model.lora.dropout=1: model.lora.dropout: a dropout probability is in [0, 1), "
                                 "got 1"});
  const auto tp = problems(kRecipe, {"parallel.tp=2"});
  REQUIRE(tp.size() == 1);
  CHECK_THAT(tp[0], Catch::Contains("parallel.tp: 2: LoRA adapters train under parallel.fsdp"));
  const auto muon = problems(kRecipe, {"optim.name=muon"});
  REQUIRE(muon.size() == 1);
  CHECK_THAT(muon[0], Catch::Contains("optim.name: muon: LoRA adapters train with adamw"));
  // A mixture's experts are 3-D tensors: its adapters stay on attention.
  const std::vector<std::string> mixture{"model.family=qwen3_moe", "model.num_experts=4", "model.num_experts_per_tok=2",
                                         "model.moe_intermediate_size=48"};
  CHECK(problems(kRecipe, mixture).empty());  // q_proj, v_proj
  auto mlp = mixture;
  mlp.push_back("model.lora.targets=[q_proj,down_proj]");
  const auto moe = problems(kRecipe, mlp);
  REQUIRE(moe.size() == 1);
  CHECK_THAT(moe[0], Catch::Contains("model.lora.targets: 'down_proj' names no module of model.family qwen3_moe; "
                                     "its modules are q_proj, k_proj, v_proj, o_proj"));
  const auto bert = problems(kRecipe, {"model.family=bert", "data.objective=mlm"});
  REQUIRE_FALSE(bert.empty());
  CHECK_THAT(bert.back(), Catch::Contains("model.family bert takes no LoRA adapters yet; the families that do are "
                                          "llama, qwen2, qwen3, qwen3_moe, mixtral, deepseek_v3, gpt_oss"));
  // Without targets the other keys are inert (a resolved recipe lists them all).
  CHECK(problems(kRecipe, {"model.lora.targets=[]", "model.lora.rank=2"}).empty());
}
