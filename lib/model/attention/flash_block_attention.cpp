#include "model/attention/flash_block_attention.h"

#include <ATen/ops/_scaled_dot_product_flash_attention.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_backward.h>
#include <torch/torch.h>

namespace xtrain::model {
namespace {

// The flash kernel takes as many kv heads as query heads.
torch::Tensor per_query_head(const torch::Tensor& t, int64_t heads) {
  return t.size(1) == heads ? t : t.repeat_interleave(heads / t.size(1), /*dim=*/1);
}

}  // namespace

bool flash_blocks_take(const torch::Tensor& q, const torch::Tensor& v) {
  const auto dtype = q.scalar_type();
  return q.is_cuda() && (dtype == torch::kBFloat16 || dtype == torch::kHalf) && q.size(3) % 8 == 0 &&
         q.size(3) <= 256 && v.size(3) == q.size(3);
}

std::pair<torch::Tensor, torch::Tensor> flash_block(const torch::Tensor& q, const torch::Tensor& k,
                                                    const torch::Tensor& v, bool causal, double scale) {
  const int64_t heads = q.size(1);
  auto result = at::_scaled_dot_product_flash_attention(q, per_query_head(k, heads), per_query_head(v, heads),
                                                        /*dropout_p=*/0.0, causal, /*return_debug_mask=*/false,
                                                        scale);
  return {std::get<0>(result), std::get<1>(result)};
}

std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> flash_block_backward(
    const torch::Tensor& dout, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
    const torch::Tensor& out, const torch::Tensor& lse, bool causal, double scale) {
  const int64_t heads = q.size(1), kv_heads = k.size(1);
  const auto no_dropout = torch::empty({0}, torch::TensorOptions().dtype(torch::kInt64).device(q.device()));
  auto [dq, dk, dv] = at::_scaled_dot_product_flash_attention_backward(
      dout.contiguous(), q, per_query_head(k, heads), per_query_head(v, heads), out.contiguous(), lse.contiguous(),
      /*cum_seq_q=*/torch::Tensor(), /*cum_seq_k=*/torch::Tensor(), q.size(2), k.size(2), /*dropout_p=*/0.0, causal,
      no_dropout, no_dropout, scale);
  auto grouped = [&](const torch::Tensor& t) {
    return heads == kv_heads ? t : t.view({t.size(0), kv_heads, heads / kv_heads, t.size(2), t.size(3)}).sum(2);
  };
  return {dq, grouped(dk), grouped(dv)};
}

}  // namespace xtrain::model
