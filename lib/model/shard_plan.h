// ShardPlan: a model's parameters grouped into the units that FSDP gathers and reduces
// together, taken from its module tree (never from parameter names): the token embedding, each
// block, and the head (final norm and output projection). Each unit names the mesh group it is
// sharded over and the one it is replicated over (parallel/device_mesh.h): dense units shard
// over "fsdp" and replicate over "dp"; a unit of experts split over "ep" shards over "edp" and
// has no replicas.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

namespace xtrain::model {

struct ShardPlan {
  struct Unit {
    std::string name;
    std::vector<std::pair<std::string, torch::Tensor>> parameters;  // full names, model order
    std::string shard_over = "fsdp";
    std::string replicate_over = "dp";
  };
  std::optional<Unit> embedding;  // none when tied: the one table then lives in the head's unit
  std::vector<Unit> blocks;
  Unit head;
};

}  // namespace xtrain::model
