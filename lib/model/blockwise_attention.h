// Memory-efficient causal attention: the same result as causal_attention, computed one
// (query block, key block) tile at a time with an online softmax, FlashAttention-2 style.
//
// q: [B, H, T, D]; k, v: [B, KV, T, D] with H a multiple of KV (kv head j serves query heads
// j*H/KV .. (j+1)*H/KV - 1, and k, v are never repeated per query head). The scale is
// 1/sqrt(D). cu_seqlens, when defined, is the int64 [0, l1, l1 + l2, ..., T] of the documents
// packed into every batch row; a query then attends only to earlier keys of its own document.
//
// Memory is linear in T: no [T, T] tensor exists in forward or backward. Forward saves q, k, v,
// the output and the row log-sum-exp ([B, H, T], fp32 or wider); backward recomputes each
// tile's probabilities from it. Tiles above the diagonal or wholly in an earlier document are
// skipped. bf16/fp16 inputs are computed and accumulated in fp32.
#pragma once
#include <cstdint>

#include <torch/types.h>

namespace xtrain::model {

torch::Tensor blockwise_causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                         const torch::Tensor& cu_seqlens = {}, int64_t block_size = 256);

}  // namespace xtrain::model
