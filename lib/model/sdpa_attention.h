// Causal attention through LibTorch's fused kernels: the same result as causal_attention.
//
// q: [B, H, T, D]; k, v: [B, KV, T, D] with H a multiple of KV. One causal sequence goes to
// scaled_dot_product_attention (flash or memory-efficient kernels on CUDA, the fused flash
// kernel on CPU). Packed documents (cu_seqlens, int64 [0, l1, ..., T], shared by every row) go to
// the variable-length flash kernel on CUDA in bf16/fp16, where every row's documents become one
// token stream; elsewhere (CPU, or fp32 on CUDA, which flash does not take) to the blockwise
// kernel. No host synchronisation: cu_seqlens lives on the host, as the data loader made it.
#pragma once
#include <cstdint>

#include <torch/types.h>

namespace xtrain::model {

torch::Tensor sdpa_causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                    const torch::Tensor& cu_seqlens = {}, int64_t block_size = 256);

// Whether packed rows of this device and dtype take the variable-length flash kernel.
bool varlen_attention_available(const torch::Device& device, torch::ScalarType dtype);

}  // namespace xtrain::model
