#include "plan/muon_cost.h"

#include <algorithm>

#include "plan/step_time_estimate.h"

namespace xtrain::plan {

double newton_schulz_flops(int64_t rows, int64_t cols, int64_t steps) {
  const double m = static_cast<double>(std::min(rows, cols)), n = static_cast<double>(std::max(rows, cols));
  return static_cast<double>(steps) * (4 * m * m * n + 2 * m * m * m);
}

namespace {

// Seconds and bytes sent per rank of a ring all-reduce of `bytes` over `ranks`, `stride` apart.
void add_all_reduce(MuonCost& cost, double bytes, int64_t ranks, int64_t stride, const ClusterLayout& layout,
                    const HardwareProfile& hw) {
  if (ranks <= 1) return;
  const double sent = 2 * bytes * static_cast<double>(ranks - 1) / static_cast<double>(ranks);
  cost.sent_bytes += sent;
  cost.communication_s += sent / ring_bandwidth(ranks, stride, layout, hw) + hw.collective_latency_ms * 1e-3;
  cost.collectives += 1;
}

}  // namespace

MuonCost muon_cost(const ModelCensus& census, const config::Recipe& recipe, const ClusterLayout& layout,
                   const HardwareProfile& hw, double stage_layers) {
  MuonCost cost;
  const auto& muon = recipe.optim.muon;
  const int64_t shard_group = layout.fsdp * layout.cp;
  const int64_t expert_group = std::max<int64_t>(1, shard_group / layout.ep);
  const double all_layers = static_cast<double>(std::max<size_t>(1, census.layers.size()));
  const double share = std::min(1.0, stage_layers / all_layers);
  for (const auto& matrix : census.muon_matrices) {
    // A matrix outside the layers (a projector) is counted on every stage: an upper bound.
    const double here = matrix.layer >= 0 ? share : 1.0;
    const double elements = static_cast<double>(matrix.rows * matrix.cols);
    if (matrix.experts) {
      const double experts = static_cast<double>(matrix.count) / static_cast<double>(layout.ep * layout.tp);
      cost.flops += here * experts * newton_schulz_flops(matrix.rows, matrix.cols, muon.ns_steps);
      MuonCost one;
      add_all_reduce(one, 4 * experts * elements, expert_group, layout.tp, layout, hw);
      cost.sent_bytes += here * one.sent_bytes;
      cost.communication_s += here * one.communication_s;
      cost.collectives += here * one.collectives;
      continue;
    }
    cost.flops += here * newton_schulz_flops(matrix.rows, matrix.cols, muon.ns_steps);
    MuonCost one;
    add_all_reduce(one, 4 * elements / static_cast<double>(layout.tp), shard_group, layout.tp, layout, hw);
    add_all_reduce(one, 4 * elements, layout.tp, 1, layout, hw);
    cost.sent_bytes += here * one.sent_bytes;
    cost.communication_s += here * one.communication_s;
    cost.collectives += here * one.collectives;
  }
  const double base = hw.gemm_base_tflops(muon.ns_dtype == config::MuonNsDtype::fp32);
  cost.compute_s = cost.flops / (base * 1e12 * hw.gemm_efficiency);
  return cost;
}

}  // namespace xtrain::plan
