#include "parallel/expert_parallel.h"

#include <map>
#include <string>

#include <fmt/format.h>
#include <torch/torch.h>

#include "parallel/expert_dispatch.h"

namespace xtrain::parallel {

model::ShardPlan apply_expert_parallel(model::CausalLM& model, const DeviceMesh& mesh, model::ShardPlan plan,
                                       int64_t micro_batches) {
  std::map<std::string, model::Placement> placements;
  for (const auto& [name, block] : model.moe_blocks()) {
    const int64_t experts = block->gate_up_proj.size(0);
    if (experts % mesh.size(Dim::ep) != 0)
      throw std::invalid_argument(fmt::format("{}: {} experts do not split over parallel.ep = {}", name, experts,
                                              mesh.size(Dim::ep)));
    auto dispatcher = std::make_shared<ExpertDispatcher>(mesh.group(Dim::ep), experts, micro_batches);
    for (const auto& [weight_name, weight] : block->expert_weights()) {
      std::vector<int64_t> offsets(static_cast<size_t>(weight->dim()), 0);
      offsets[0] = dispatcher->first_expert();
      placements[name + "." + weight_name] = {weight->sizes().vec(), offsets};
    }
    shard_experts(*block, dispatcher);
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
      // A placement places a part in the whole tensor, not a part of a part: experts that tensor
      // parallelism has placed (sliced or copied over tp) cannot split over ep as well.
      if (earlier != block.front().placements.end())
        throw std::invalid_argument(name + ": experts under tensor parallelism cannot also split over parallel.ep");
      experts.parameters.emplace_back(name, tensor);
      experts.placements.insert(*placed);
    }
    if (experts.parameters.empty()) continue;
    block = {std::move(dense), std::move(experts)};
  }
  return plan;
}

}  // namespace xtrain::parallel
