// The files a distributed run writes into a checkpoint folder. Every rank holding a distinct
// shard (the first replica of each) writes shard-<rank>.safetensors with its pieces of every
// parameter and of its optimizer state, as 1-D tensors "model/<name>", "exp_avg/<name>" and
// "exp_avg_sq/<name>"; the metadata maps each <name> to its place in the whole tensor
// (ckpt/piece_layout.h): {"shape": [whole shape], "offsets": [box offsets], "sizes": [box sizes],
// "begin": first element of the box's flattening held}, and "optimizer_step" to the optimizer's
// step count. Checkpoints written before pieces had boxes lack "offsets" and "sizes": their box
// is the whole tensor.
// Rank 0 writes shards.json (the layout that wrote them), config.json, trainer_state.json and
// recipe.yaml. CheckpointReader reads them back for any layout.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <torch/types.h>

#include "ckpt/piece_layout.h"

namespace xtrain::ckpt {

struct ParameterPiece {
  std::string name;
  PieceLayout layout;  // count: the values' numel
  torch::Tensor model, exp_avg, exp_avg_sq;  // 1-D, equal lengths
};

std::string shard_file_name(int64_t rank);

void write_checkpoint_shard(const std::string& dir, int64_t rank, const std::vector<ParameterPiece>& pieces,
                            int64_t optimizer_step);

}  // namespace xtrain::ckpt
