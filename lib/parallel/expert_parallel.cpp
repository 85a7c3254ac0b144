#include "parallel/expert_parallel.h"

#include <map>
#include <string>

#include <fmt/format.h>
#include <torch/torch.h>

#include "parallel/expert_dispatch.h"

namespace xtrain::parallel {

namespace {

// The placement in the whole tensor of this ep rank's experts, out of the tp rank's experts that
// `tp` places: tensor parallelism splits the experts by expert (model/layers/moe.h), ep those further.
model::Placement within(const model::Placement& tp, const model::Placement& ep, const std::string& name) {
  for (size_t d = 1; d < tp.offsets.size(); ++d)
    if (tp.offsets[d] != 0)
      throw std::invalid_argument(name + ": tensor parallelism split these experts by more than the expert "
                                         "dimension, which expert parallelism cannot split further");
  if (tp.copies != 1)
    throw std::invalid_argument(name + ": experts replicated over tensor parallelism cannot also split over parallel.ep");
  model::Placement placement = tp;
  placement.offsets[0] += ep.offsets[0];
  return placement;
}

}  // namespace

model::ShardPlan apply_expert_parallel(model::CausalLM& model, const DeviceMesh& mesh, model::ShardPlan plan,
                                       int64_t micro_batches,
                                       std::vector<std::shared_ptr<const ExpertDispatcher>>* installed) {
  std::map<std::string, model::Placement> placements;
  for (const auto& [name, block] : model.moe_blocks()) {
    const int64_t experts = block->gate_up_proj.size(0);
    if (experts % mesh.size(Dim::ep) != 0)
      throw std::invalid_argument(fmt::format("{}: {} experts do not split over parallel.ep = {}", name, experts,
                                              mesh.size(Dim::ep)));
    auto dispatcher = std::make_shared<ExpertDispatcher>(mesh.group(Dim::ep), experts, micro_batches);
    for (const auto& [weight_name, weight] : block->expert_weights()) {
      std::vector<int64_t> offsets(static_cast<size_t>(weight.dim()), 0);
      offsets[0] = dispatcher->first_expert();
      placements[name + "." + weight_name] = {weight.sizes().vec(), offsets};
    }
    shard_experts(*block, dispatcher);
    if (installed) installed->push_back(dispatcher);
  }
  for (auto& block : plan.blocks) {
    model::ShardPlan::Unit dense = block.front(), experts{block.front().name + ".experts", {}, Dim::edp, Dim::self, {}};
    dense.parameters.clear();
    dense.placements.clear();
    for (auto& [name, tensor] : block.front().parameters) {
      const auto placed = placements.find(name);
      const auto earlier = block.front().placements.find(name);
      if (placed == placements.end()) {
        dense.parameters.emplace_back(name, tensor);
        if (earlier != block.front().placements.end()) dense.placements.insert(*earlier);
        continue;
      }
      experts.parameters.emplace_back(name, tensor);
      experts.placements[name] = earlier == block.front().placements.end() ? placed->second
                                                                           : within(earlier->second, placed->second, name);
    }
    if (experts.parameters.empty()) continue;
    block = {std::move(dense), std::move(experts)};
  }
  return plan;
}

}  // namespace xtrain::parallel
