// Rotary position embeddings (Su et al. 2021) in the Hugging Face Llama convention: the head
// dimension is split in two halves that rotate together (rotate_half), not interleaved pairs.
// Because q_proj/k_proj weights are stored in this layout, checkpoints load into HF
// transformers without permuting rows.
#pragma once
#include <torch/types.h>

#include "model/spec/model_config.h"
#include "model/layers/sequence_layout.h"

namespace xtrain::model {

struct RotaryTables {
  torch::Tensor cos;  // [positions, head_dim]
  torch::Tensor sin;
};

// Tables for positions 0 .. num_positions - 1, in fp32, with the frequencies scaled as
// transformers' llama3 or yarn rope type does when scaling is enabled (yarn's tables multiplied
// by its attention factor, as transformers' are).
RotaryTables rotary_tables(int64_t num_positions, int64_t head_dim, double theta, const RopeScaling& scaling = {});

// Features stored in interleaved pairs (x0, x1), (x2, x3), ... laid out as two halves (x0, x2,
// ...), (x1, x3, ...), which apply_rotary then rotates: transformers' rope_interleave. q and k
// both permuted alike, their products are unchanged.
torch::Tensor deinterleave(const torch::Tensor& x);

// A table's rows for the tokens of a row of `seq` tokens laid out as `layout`, each position
// moved on by `shift` (XTRAIN_NUMERIC_FAULT rope_shift; 0 otherwise) and kept inside the table.
torch::Tensor rotary_rows(const torch::Tensor& table, const SequenceLayout& layout, int64_t seq, int64_t shift = 0);

// x: [batch, heads, seq, head_dim]; cos/sin: [seq, head_dim] (broadcast over batch and heads).
torch::Tensor apply_rotary(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);

}  // namespace xtrain::model
