// Memory-efficient causal attention: the same result as causal_attention, computed one
// (query block, key block) tile at a time with an online softmax, FlashAttention-2 style.
//
// q: [B, H, T, D]; k: [B, KV, T, D]; v: [B, KV, T, Dv] with H a multiple of KV (kv head j
// serves query heads j*H/KV .. (j+1)*H/KV - 1, and k, v are never repeated per query head).
// cu_seqlens, when defined, is the int64 [0, l1, l1 + l2, ..., T] of the documents packed into
// every batch row; a query then attends only to earlier keys of its own document. The variant
// takes every form: its scale, its window (tiles wholly outside it are skipped, so the cost is
// linear in T for a fixed window) and its sinks (joined to each row's softmax once, after the
// tiles; their gradient is returned like q's).
//
// Memory is linear in T: no [T, T] tensor exists in forward or backward. Forward saves q, k, v,
// the output and the row log-sum-exp ([B, H, T], fp32 or wider, the sinks included); backward
// recomputes each tile's probabilities from it. Tiles above the diagonal, wholly in an earlier
// document or before the window are skipped. bf16/fp16 inputs are computed and accumulated in
// fp32.
#pragma once
#include <cstdint>

#include <torch/types.h>

#include "model/attention/attention.h"

namespace xtrain::model {

torch::Tensor blockwise_causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                         const torch::Tensor& cu_seqlens = {}, int64_t block_size = 256,
                                         const AttentionVariant& variant = {});

}  // namespace xtrain::model
