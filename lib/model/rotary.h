// Rotary position embeddings (Su et al. 2021) in the Hugging Face Llama convention: the head
// dimension is split in two halves that rotate together (rotate_half), not interleaved pairs.
// Because q_proj/k_proj weights are stored in this layout, checkpoints load into HF
// transformers without permuting rows.
#pragma once
#include <torch/types.h>

#include "model/model_config.h"

namespace xtrain::model {

struct RotaryTables {
  torch::Tensor cos;  // [positions, head_dim]
  torch::Tensor sin;
};

// Tables for positions 0 .. num_positions - 1, in fp32, with the frequencies scaled as
// transformers' llama3 rope type does when scaling is enabled.
RotaryTables rotary_tables(int64_t num_positions, int64_t head_dim, double theta, const RopeScaling& scaling = {});

// x: [batch, heads, seq, head_dim]; cos/sin: [seq, head_dim] (broadcast over batch and heads).
torch::Tensor apply_rotary(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);

}  // namespace xtrain::model
