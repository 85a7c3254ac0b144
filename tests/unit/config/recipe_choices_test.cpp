// The closed choices of a recipe: each enum's names come from its one table, parse back to the
// same value, and are exactly the words recipes, dumped recipes and messages have always used.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "config/recipe.h"
#include "config/recipe_loader.h"
#include "layout/mesh_dim.h"

using namespace xtrain;

namespace {

template <class E>
void require_round_trip() {
  for (E value : util::choices<E>()) {
    INFO(to_string(value));
    REQUIRE(util::parse_choice<E>(to_string(value)) == value);
  }
  REQUIRE_FALSE(util::parse_choice<E>("not a choice"));
}

}  // namespace

TEST_CASE("each choice's name parses back to it, and nothing else parses", "[config]") {
  require_round_trip<config::Dtype>();
  require_round_trip<config::OmpWaitPolicy>();
  require_round_trip<config::Spike>();
  require_round_trip<config::Objective>();
  require_round_trip<config::GrpoLoss>();
  require_round_trip<config::GrpoRewardScaling>();
  require_round_trip<config::GrpoRatioLevel>();
  require_round_trip<config::GrpoReward>();
  require_round_trip<config::Optimizer>();
  require_round_trip<config::PpSchedule>();
  require_round_trip<config::Backend>();
  require_round_trip<util::DeviceSetting>();
  require_round_trip<config::LrDecay>();
  require_round_trip<memory::Recompute>();
  require_round_trip<memory::Attention>();
  require_round_trip<model::Router>();
  require_round_trip<model::DropPolicy>();
  require_round_trip<model::AuxLossScope>();
  require_round_trip<parallel::Dim>();
  require_round_trip<parallel::ContextKind>();
}

TEST_CASE("the names are the recipe's words, in the order its messages list them", "[config]") {
  using Names = std::vector<std::string>;
  CHECK(util::choice_names<config::Dtype>() == Names{"fp32", "bf16", "fp16"});
  CHECK(util::choice_names<config::PpSchedule>() ==
        Names{"gpipe", "1f1b", "interleaved_1f1b", "zb_h1", "zbv", "dualpipev"});
  CHECK(util::choice_names<config::GrpoLoss>() == Names{"grpo", "bnpo", "dr_grpo", "dapo"});
  CHECK(util::choice_names<config::GrpoReward>() ==
        Names{"exact_match", "number_match", "format", "overlong", "command"});
  CHECK(util::choice_names<config::OmpWaitPolicy>() == Names{"auto", "default", "passive", "active"});
  CHECK(util::choice_names<memory::Attention>() == Names{"auto", "naive", "blockwise", "sdpa"});
  CHECK(util::choice_names<parallel::Dim>() == Names{"pp", "dp", "fsdp", "cp", "tp", "ep", "edp", "world", "self"});
  CHECK(util::choice_names<parallel::ContextKind>() == Names{"ring", "ulysses"});
  static_assert(util::choice_count<config::Dtype>() == 3);
}

TEST_CASE("checkpoint.resume: a word is its kind, anything else a folder, and both read back as written",
          "[config]") {
  CHECK(config::parse_resume("strict").kind == config::ResumeKind::strict);
  CHECK(config::parse_resume("never").kind == config::ResumeKind::never);
  const auto folder = config::parse_resume("runs/a/checkpoints/step-4");
  CHECK(folder.kind == config::ResumeKind::folder);
  CHECK(folder.folder == "runs/a/checkpoints/step-4");
  CHECK(config::resume_text(folder) == "runs/a/checkpoints/step-4");
  CHECK(config::resume_text(config::parse_resume("auto")) == "auto");
  // A folder named like the kind's own name is still a folder.
  CHECK(config::parse_resume("folder").kind == config::ResumeKind::folder);

  config::LoadOptions options;
  options.check_files = false;
  options.overrides = {"checkpoint.resume=runs/x/checkpoints/step-2", "parallel.pp_schedule=gpipe",
                       "train.dtype=bf16"};
  const auto recipe = config::load_recipe_text("name: r\n", "r.yaml", options);
  CHECK(recipe.checkpoint.resume.folder == "runs/x/checkpoints/step-2");
  CHECK(recipe.parallel.pp_schedule == config::PpSchedule::gpipe);
  CHECK(recipe.train.dtype == config::Dtype::bf16);
  const auto dumped = config::dump_recipe(recipe);
  CHECK(dumped.find("  resume: runs/x/checkpoints/step-2\n") != std::string::npos);
  CHECK(dumped.find("  pp_schedule: gpipe\n") != std::string::npos);
  CHECK(dumped.find("  dtype: bf16\n") != std::string::npos);
}
