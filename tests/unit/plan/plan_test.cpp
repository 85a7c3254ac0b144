// The planner's arithmetic on a census small enough to count by hand: each rank's share of a
// pipeline stage, the model-state and activation terms, ring collectives' link choice, the
// pipeline bubble, and --search's ranking of the layouts that fit.
#include <catch2/catch.hpp>

#include "plan/hardware_profile.h"
#include "plan/layout_search.h"
#include "plan/memory_estimate.h"
#include "plan/stage_share.h"
#include "plan/step_time_estimate.h"

using namespace xtrain;

namespace {

// 4 layers, each attention 1000 + MLP 3000 matrix parameters + 10 norm gains; embedding and head
// 2000 each.
plan::ModelCensus four_layers() {
  plan::ModelCensus c;
  c.embedding = c.head = 2000;
  c.other = 10;
  for (int i = 0; i < 4; ++i) c.layers.push_back({1000, 3000, 0, 0, 10});
  c.hidden = 16, c.query_width = 16, c.key_width = 8, c.value_width = 16, c.intermediate = 64, c.heads = 4;
  c.vocab = 125;
  return c;
}

config::Recipe recipe_for(int64_t global_batch, int64_t micro_batch, int64_t seq) {
  config::Recipe r;
  r.train.global_batch_size = global_batch;
  r.train.micro_batch_size = micro_batch;
  r.train.dtype = config::Dtype::bf16;
  r.data.seq_len = seq;
  r.memory.chunked_loss = "auto";
  return r;
}

plan::HardwareProfile device() {
  plan::HardwareProfile hw;
  hw.name = "test";
  hw.peak_tflops_fp32 = hw.peak_tflops_bf16 = 1;
  hw.memory_gib = 1;
  hw.memory_gbs = hw.intra_node_gbs = 100;
  hw.inter_node_gbs = 10;
  hw.runtime_gib = 0.25;
  hw.gemm_efficiency = hw.attention_efficiency = hw.expert_efficiency = 0.5;
  hw.link_efficiency = 1;
  return hw;
}

}  // namespace

TEST_CASE("a rank's share of the fullest pipeline stage", "[plan]") {
  const auto c = four_layers();
  plan::ClusterLayout layout;
  layout.pp = 2, layout.tp = 2;
  const auto share = plan::stage_share(c, layout);
  // Stage 1 holds two layers, the head and the final norm, 10 more than stage 0's two layers and
  // the table; tp halves each.
  CHECK(share.layers == 2);
  CHECK(share.dense == Approx((2 * 4010 + 2000 + 10) / 2.0));
  CHECK(share.head == Approx(1000));
  CHECK(share.largest_layer == Approx(4010 / 2.0));
}

TEST_CASE("model state, activations and runtime add up as counted", "[plan]") {
  const auto c = four_layers();
  auto recipe = recipe_for(8, 2, 32);
  plan::ClusterLayout layout;
  layout.fsdp = 4;
  const auto memory = plan::estimate_memory(c, recipe, layout, device());
  const double state = (4 * 4010 + 2000 + 2000 + 10) * 16.0 / 4;
  CHECK(memory.terms[0].name == "model state (dense)");
  CHECK(memory.terms[0].bytes == Approx(state));
  // Per token per layer: 4 x 16 (norm inputs and outputs) + 16 + 16 + 16 (q, k, v) + 16 (out)
  // + 3 x 64 (MLP), in bf16; 64 tokens, 4 layers, one micro batch in flight.
  const double per_token = 4 * 16 + 16 + 2 * 8 + 16 + 3 * 64;
  const auto& activations = memory.terms[2];
  REQUIRE(activations.name == "activations");
  CHECK(activations.bytes == Approx(per_token * 2 * 64 * 4));
  recipe.memory.recompute = memory::Recompute::full;
  const auto recomputed = plan::estimate_memory(c, recipe, layout, device());
  // Each layer keeps its input, and one layer's whole activations live again during backward.
  CHECK(recomputed.terms[2].bytes == Approx(16 * 2 * 64 * 4 + per_token * 2 * 64));
  CHECK(memory.terms.back().bytes == Approx(0.25 * plan::kGiB));
}

TEST_CASE("collectives take the link their group lies on, and the bubble follows the schedule", "[plan]") {
  const auto c = four_layers();
  const auto recipe = recipe_for(8, 1, 32);
  plan::ClusterLayout inside, across;
  inside.gpus_per_node = 4, inside.fsdp = 4;
  across.nodes = 4, across.gpus_per_node = 1, across.fsdp = 4;
  auto seconds_of = [](const plan::StepTimeEstimate& e, const std::string& name) {
    for (const auto& term : e.terms)
      if (term.name == name) return term.seconds;
    return -1.0;
  };
  const auto fast = plan::estimate_step_time(c, recipe, inside, device());
  const auto slow = plan::estimate_step_time(c, recipe, across, device());
  CHECK(seconds_of(slow, "FSDP gathers and reductions") > seconds_of(fast, "FSDP gathers and reductions"));
  plan::ClusterLayout piped;
  piped.pp = 2, piped.fsdp = 1;
  auto pipelined = recipe;
  pipelined.parallel.pp = 2;
  const auto e = plan::estimate_step_time(c, pipelined, piped, device());
  // 8 micro batches over 2 stages: a bubble of 1/8 of the compute.
  const double compute = seconds_of(e, "GEMMs (dense)") + seconds_of(e, "attention");
  CHECK(seconds_of(e, "pipeline bubble") == Approx(compute / 8));
}

TEST_CASE("the layout search returns only layouts that fit, fastest first", "[plan]") {
  const auto c = four_layers();
  int64_t tried = 0;
  const auto best = plan::search_layouts(c, recipe_for(16, 1, 32), 2, 4, device(), 5, &tried);
  REQUIRE(!best.empty());
  CHECK(tried > static_cast<int64_t>(best.size()));
  for (size_t i = 0; i < best.size(); ++i) {
    CHECK(best[i].memory.total() <= plan::kGiB);
    CHECK(best[i].layout.world() == 8);
    if (i > 0) CHECK(best[i - 1].time.seconds() <= best[i].time.seconds());
  }
}
