// ShardPlan: a model's parameters grouped into the units that FSDP gathers and reduces
// together, taken from its module tree (never from parameter names): the token embedding, each
// block, and the head (final norm and output projection). Each unit names the mesh dimension it is
// sharded over and the one it is replicated over (layout/mesh_dim.h): dense units shard
// over "fsdp" and replicate over "dp"; a unit of experts split over "ep" shards over "edp" and
// has no replicas.
//
// A block may be several units, gathered and reduced together (under expert parallelism, its
// dense part and its experts). A unit's parameter may be a part of a larger tensor, the same
// for every rank of its model (a rank's experts of a layer, a tensor-parallel slice): its
// placement then gives the whole tensor's shape and the part's offset in each dimension (the
// part's sizes are the parameter's), so that sources, checkpoints and the optimizer see whole
// tensors' names and elements. `copies` counts the ranks outside the unit's groups that hold the
// same part (a norm's weight on every tensor-parallel rank): checkpoints write it once and the
// gradient norm counts it once.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

#include "layout/mesh_dim.h"
#include "model/layers/float8.h"

namespace xtrain::model {

struct Placement {
  std::vector<int64_t> whole_shape;
  std::vector<int64_t> offsets;  // of the part in the whole, one per dimension
  int64_t copies = 1;
};

struct ShardPlan {
  struct Unit {
    std::string name;
    std::vector<std::pair<std::string, torch::Tensor>> parameters;  // full names, model order
    parallel::Dim shard_over = parallel::Dim::fsdp;
    parallel::Dim replicate_over = parallel::Dim::dp;
    std::map<std::string, Placement> placements;  // by name, for parts of larger tensors only
  };
  std::optional<Unit> embedding;  // none when tied: the one table then lives in the head's unit
  std::vector<std::vector<Unit>> blocks;  // each block's units
  Unit head;
  // Under pipeline parallelism, whether chunks other than the last read the head unit (an
  // encoder's embeddings beside the head tied to them; an encoder-decoder's shared table,
  // position tables and final norms): every stage then keeps it, the first stage's copy primary,
  // and the copies' gradients are summed over the pipeline. Requires no embedding unit.
  bool head_read_by_every_stage = false;
  // Weights the units gather in FP8, by full name, with the blocks their scales cover
  // (parallel/float8_gather.h); empty unless precision.fp8_all_gather applies.
  std::map<std::string, ScaleBlock> float8_gathered;
};

}  // namespace xtrain::model
