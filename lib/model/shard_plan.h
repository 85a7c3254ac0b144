// ShardPlan: a model's parameters grouped into the units that FSDP gathers and reduces
// together, taken from its module tree (never from parameter names): the token embedding, each
// block, and the head (final norm and output projection).
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
  };
  std::optional<Unit> embedding;  // none when tied: the one table then lives in the head's unit
  std::vector<Unit> blocks;
  Unit head;
};

}  // namespace xtrain::model
