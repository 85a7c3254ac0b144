// optim.name muon's planner term (plan/muon_cost.h) counted by hand: the Newton-Schulz FLOPs of
// a matrix, every whole matrix (and each expert of the rank's box) on every rank, the assembly's
// ring all-reduces over FSDP's shard group and tensor parallelism, and the step estimate growing
// by exactly those two terms.
#include <catch2/catch.hpp>

#include <string>

#include "plan/muon_cost.h"
#include "plan/step_time_estimate.h"

using namespace xtrain;

namespace muon_cost_test {

// 2 layers, each a [16 x 16] matrix and a stack of 4 experts' [8 x 16] matrices.
plan::ModelCensus census() {
  plan::ModelCensus c;
  c.embedding = c.head = 2000;
  for (int64_t layer = 0; layer < 2; ++layer) {
    c.layers.push_back({256, 0, 512, 256, 10});
    c.muon_matrices.push_back({16, 16, 1, layer, false});
    c.muon_matrices.push_back({8, 16, 4, layer, true});
  }
  c.hidden = 16, c.query_width = 16, c.key_width = 16, c.value_width = 16, c.intermediate = 64, c.heads = 4;
  c.moe_intermediate = 8, c.experts = 4, c.top_k = 2;
  c.vocab = 125;
  return c;
}

config::Recipe muon_recipe() {
  config::Recipe r;
  r.train.global_batch_size = 4;
  r.train.micro_batch_size = 1;
  r.train.dtype = config::Dtype::fp32;
  r.data.seq_len = 32;
  r.memory.chunked_loss = "auto";
  r.optim.name = config::Optimizer::muon;
  r.optim.muon.ns_steps = 5;
  r.optim.muon.ns_dtype = config::MuonNsDtype::fp32;
  return r;
}

plan::HardwareProfile device() {
  plan::HardwareProfile hw;
  hw.name = "test";
  hw.peak_tflops_fp32 = 2, hw.peak_tflops_bf16 = 8;
  hw.memory_gib = 1;
  hw.memory_gbs = hw.intra_node_gbs = 100;
  hw.inter_node_gbs = 10;
  hw.gemm_efficiency = hw.attention_efficiency = hw.expert_efficiency = 0.5;
  hw.link_efficiency = 1;
  hw.collective_latency_ms = 1;
  return hw;
}

double seconds_of(const plan::StepTimeEstimate& e, const std::string& name) {
  for (const auto& term : e.terms)
    if (term.name == name) return term.seconds;
  return -1.0;
}

}  // namespace muon_cost_test

TEST_CASE("muon: a matrix's Newton-Schulz FLOPs, ns_steps x (4 m^2 n + 2 m^3) for m <= n", "[plan][muon]") {
  CHECK(plan::newton_schulz_flops(128, 384, 5) == 5.0 * (4.0 * 128 * 128 * 384 + 2.0 * 128 * 128 * 128));
  CHECK(plan::newton_schulz_flops(384, 128, 5) == plan::newton_schulz_flops(128, 384, 5));  // transposed
  CHECK(plan::newton_schulz_flops(64, 64, 1) == 6.0 * 64 * 64 * 64);
}

TEST_CASE("muon: every rank orthogonalises every matrix and all-reduces the pieces", "[plan][muon]") {
  const auto c = muon_cost_test::census();
  const auto recipe = muon_cost_test::muon_recipe();
  const auto hw = muon_cost_test::device();
  const double square = plan::newton_schulz_flops(16, 16, 5), expert = plan::newton_schulz_flops(8, 16, 5);
  plan::ClusterLayout fsdp2;
  fsdp2.gpus_per_node = 2, fsdp2.fsdp = 2;
  const auto cost = plan::muon_cost(c, recipe, fsdp2, hw, 2);
  CHECK(cost.flops == Approx(2 * square + 2 * 4 * expert));
  CHECK(cost.compute_s == Approx(cost.flops / (2e12 * 0.5)));
  // Each matrix (fp32) once over the 2 ranks of the shard group: a ring all-reduce sends 2 x 1/2.
  const double sent = 2 * (16 * 16 * 4) + 2 * (4 * 8 * 16 * 4);
  CHECK(cost.sent_bytes == Approx(sent));
  CHECK(cost.collectives == 4);
  CHECK(cost.communication_s == Approx(sent / 100e9 + 4 * 1e-3));
  // bf16 Newton-Schulz at the bf16 peak.
  auto bf16 = recipe;
  bf16.optim.muon.ns_dtype = config::MuonNsDtype::bf16;
  CHECK(plan::muon_cost(c, bf16, fsdp2, hw, 2).compute_s == Approx(cost.flops / (8e12 * 0.5)));
  // One rank: nothing to assemble.
  CHECK(plan::muon_cost(c, recipe, plan::ClusterLayout{}, hw, 2).sent_bytes == 0);
  // Half the layers on a pipeline stage: half of everything.
  plan::ClusterLayout piped = fsdp2;
  piped.pp = 2, piped.gpus_per_node = 4;
  CHECK(plan::muon_cost(c, recipe, piped, hw, 1).flops == Approx(cost.flops / 2));
}

TEST_CASE("muon: under tp 2 slices are assembled whole and experts split by expert", "[plan][muon]") {
  const auto c = muon_cost_test::census();
  plan::ClusterLayout tp2;
  tp2.gpus_per_node = 2, tp2.tp = 2;
  const auto cost = plan::muon_cost(c, muon_cost_test::muon_recipe(), tp2, muon_cost_test::device(), 2);
  const double square = plan::newton_schulz_flops(16, 16, 5), expert = plan::newton_schulz_flops(8, 16, 5);
  CHECK(cost.flops == Approx(2 * square + 2 * 2 * expert));  // whole matrices, 2 experts of 4
  CHECK(cost.sent_bytes == Approx(2 * (16 * 16 * 4)));        // the whole matrix over tp; experts stay
  CHECK(cost.collectives == 2);
}

TEST_CASE("muon: the step estimate adds its two terms to AdamW's", "[plan][muon]") {
  const auto c = muon_cost_test::census();
  plan::ClusterLayout fsdp2;
  fsdp2.gpus_per_node = 2, fsdp2.fsdp = 2;
  auto adamw = muon_cost_test::muon_recipe();
  adamw.optim.name = config::Optimizer::adamw;
  const auto with = plan::estimate_step_time(c, muon_cost_test::muon_recipe(), fsdp2, muon_cost_test::device());
  const auto without = plan::estimate_step_time(c, adamw, fsdp2, muon_cost_test::device());
  const auto cost = plan::muon_cost(c, muon_cost_test::muon_recipe(), fsdp2, muon_cost_test::device(), 2);
  CHECK(muon_cost_test::seconds_of(without, "Muon Newton-Schulz") == -1.0);
  CHECK(muon_cost_test::seconds_of(with, "Muon Newton-Schulz") == Approx(cost.compute_s));
  CHECK(muon_cost_test::seconds_of(with, "Muon assembly") == Approx(cost.communication_s));
  CHECK(with.seconds() == Approx(without.seconds() + cost.compute_s + cost.communication_s));
}
