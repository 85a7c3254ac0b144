// One block pair of ring attention through the CUDA flash kernel, which returns the
// log-sum-exp the ring merges with: queries over keys that are all visible (an earlier span) or
// over the same span (causal). Backward takes the whole attention's output and log-sum-exp, as
// the ring's blocks are parts of it, and gives this pair's share of the gradients.
//
// q: [B, H, Tq, D]; k, v: [B, KV, Tk, D], H a multiple of KV, bf16 or fp16 on CUDA, D a
// multiple of 8 up to 256 and v's head dim the same (flash_blocks_take says so). `scale` is the
// softmax scale (model::AttentionVariant::softmax_scale). No window and no sinks: the ring
// sends those to its tiles, or joins the sinks itself.
#pragma once
#include <tuple>
#include <utility>

#include <torch/types.h>

namespace xtrain::model {

bool flash_blocks_take(const torch::Tensor& q, const torch::Tensor& v);

// out [B, H, Tq, D] (q's dtype) and lse [B, H, Tq] (fp32).
std::pair<torch::Tensor, torch::Tensor> flash_block(const torch::Tensor& q, const torch::Tensor& k,
                                                    const torch::Tensor& v, bool causal, double scale);

// dq [B, H, Tq, D], and dk, dv [B, KV, Tk, D] summed over each kv head's query heads; out and lse
// are the whole attention's rows of these queries.
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> flash_block_backward(
    const torch::Tensor& dout, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
    const torch::Tensor& out, const torch::Tensor& lse, bool causal, double scale);

}  // namespace xtrain::model
