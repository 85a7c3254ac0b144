// Where the layout's groups fall on the nodes. Ranks are laid out node after node, ranks_per_node
// each, as xtrain launch, torchrun and SLURM's block distribution place them; with the mesh's
// order (pp, dp, fsdp, tp, tp innermost) tp's groups, then fsdp's and ep's, are runs of nearby
// ranks, so they stay inside a node whenever their sizes divide its ranks, and HSDP's replicas
// (dp) cross nodes. The start-up log prints the placement; a layout whose tensor-parallel or
// expert-parallel groups cross nodes, where every layer's collectives would go over the network,
// gets a warning.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "parallel/device_mesh.h"

namespace xtrain::parallel {

struct GroupSpan {
  Dim dimension = Dim::dp;            // pp, dp, fsdp, tp or ep
  int64_t group_size = 0, groups = 0;
  int64_t crossing = 0;               // groups whose ranks sit on more than one node
  std::vector<int64_t> first_ranks;   // the first group's ranks, and their nodes
  std::vector<int64_t> first_nodes;
};

// One entry per dimension of more than one rank, in mesh order (ep last).
std::vector<GroupSpan> group_spans(const ParallelDegrees& degrees, int64_t world_size, int64_t ranks_per_node);

// "placement on 2 nodes x 2 ranks: tp 2: within a node (2 groups; ranks 0,1 on node 0); ..."
std::string describe_placement(const ParallelDegrees& degrees, int64_t world_size, int64_t ranks_per_node);

// The warning for tp or ep groups that cross nodes, naming the degree, the ranks per node and what
// would keep them inside; nullopt when they stay inside or there is one node.
std::optional<std::string> placement_warning(const ParallelDegrees& degrees, int64_t world_size,
                                             int64_t ranks_per_node);

}  // namespace xtrain::parallel
