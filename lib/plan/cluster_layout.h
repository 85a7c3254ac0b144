// ClusterLayout: a recipe's parallel degrees placed on nodes x devices, in the mesh's order
// (parallel/device_mesh.h: pp outermost, then dp, fsdp, cp, tp innermost; experts fold into
// the data ranks), so that the planner knows each group's size and whether it stays inside a
// node (the fast link) or spans nodes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "config/recipe.h"

namespace xtrain::plan {

struct ClusterLayout {
  int64_t nodes = 1, gpus_per_node = 1;
  int64_t dp = 1, fsdp = 1, cp = 1, tp = 1, pp = 1, ep = 1, virtual_stages = 1;
  bool sequence_parallel = false;
  // How pipeline stages are cut: xtrain counts the embedding and the head as a layer each
  // (config/pipeline_layout.h); Megatron splits the layers evenly and puts the ends beside them.
  bool ends_as_layers = true;
  std::vector<int64_t> pipeline_layers;  // parallel.pp_layers: the recipe's own cut, by chunk
  config::PpSchedule schedule = config::PpSchedule::one_f_one_b;

  int64_t world() const { return nodes * gpus_per_node; }
  int64_t data_ranks() const { return dp * fsdp; }
  // The ranks each expert's weights shard over once ep has split them (Megatron's expert-data).
  int64_t expert_shards() const { return dp * fsdp * cp / ep; }
  // Whether a group of `size` ranks `stride` apart in rank order lies inside one node.
  bool inside_node(int64_t size, int64_t stride) const { return size * stride <= gpus_per_node; }
  bool tp_inside() const { return inside_node(tp, 1); }
  bool cp_inside() const { return inside_node(cp, tp); }
  bool fsdp_inside() const { return inside_node(fsdp, tp * cp); }
  bool dp_inside() const { return inside_node(dp, tp * cp * fsdp); }
  bool ep_inside() const { return inside_node(ep, tp * cp); }
  std::string describe() const;
};

// The recipe's degrees on `nodes` x `gpus_per_node` ranks, parallel.fsdp -1 taking the ranks
// left. Throws InputError when the degrees do not fit the ranks.
ClusterLayout layout_of(const config::Recipe& recipe, int64_t nodes, int64_t gpus_per_node);

}  // namespace xtrain::plan
