// Causal attention through LibTorch's fused kernels: the same result as causal_attention.
//
// q: [B, H, T, D]; k: [B, KV, T, D]; v: [B, KV, T, Dv] with H a multiple of KV. One causal
// sequence goes to scaled_dot_product_attention (flash or memory-efficient kernels on CUDA, the
// fused flash kernel on CPU) with the variant's scale. Packed documents (cu_seqlens, int64
// [0, l1, ..., T], shared by every row) go to the variable-length flash kernel on CUDA in
// bf16/fp16, where every row's documents become one token stream; it takes the scale and the
// window (window_size_left) too. Elsewhere (CPU, fp32 on CUDA, Dv != D, which flash does not
// take) packed rows go to the blockwise kernel.
//
// What SDPA has no form for goes to the blockwise kernel (model/attention/blockwise_attention.h), whose
// cost stays linear in the window, rather than to an explicit [T, T] mask: sinks always, and a
// window shorter than the row when the varlen kernel does not apply. No host synchronisation:
// cu_seqlens lives on the host, as the data loader made it.
#pragma once
#include <cstdint>

#include <torch/types.h>

#include "model/attention/attention.h"

namespace xtrain::model {

torch::Tensor sdpa_causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                    const torch::Tensor& cu_seqlens = {}, int64_t block_size = 256,
                                    const AttentionVariant& variant = {});

// Whether packed rows of this device and dtype take the variable-length flash kernel.
bool varlen_attention_available(const torch::Device& device, torch::ScalarType dtype);

}  // namespace xtrain::model
