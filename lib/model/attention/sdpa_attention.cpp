#include "model/attention/sdpa_attention.h"

#include <ATen/ops/_flash_attention_forward.h>
#include <ATen/ops/scaled_dot_product_attention.h>
#include <torch/torch.h>

#include "model/attention/blockwise_attention.h"

namespace xtrain::model {
namespace {

// The row-major stream of every row's documents: [0, l1, ..., T, T + l1, ..., B * T], int32, and
// the longest document. cu_seqlens is read on the host (where the loader built it).
std::pair<torch::Tensor, int64_t> stream_bounds(const torch::Tensor& cu_seqlens, int64_t batch, int64_t seq) {
  auto bounds = cu_seqlens.to(torch::kCPU, torch::kInt64).contiguous();
  const int64_t* b = bounds.data_ptr<int64_t>();
  const int64_t n = bounds.numel();
  TORCH_CHECK(n >= 2 && b[0] == 0 && b[n - 1] == seq, "cu_seqlens must run from 0 to the sequence length ", seq);
  std::vector<int32_t> stream{0};
  int64_t longest = 0;
  for (int64_t row = 0; row < batch; ++row)
    for (int64_t i = 1; i < n; ++i) {
      const int64_t length = b[i] - b[i - 1];
      if (length == 0) continue;  // an empty document adds no tokens and no segment
      longest = std::max(longest, length);
      stream.push_back(static_cast<int32_t>(row * seq + b[i]));
    }
  return {torch::tensor(stream, torch::kInt32), longest};
}

torch::Tensor varlen_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const torch::Tensor& cu_seqlens, const AttentionVariant& variant) {
  const int64_t batch = q.size(0), heads = q.size(1), seq = q.size(2), dim = q.size(3);
  auto [bounds, longest] = stream_bounds(cu_seqlens, batch, seq);
  bounds = bounds.to(q.device(), /*non_blocking=*/true);
  // [B, X, T, D] -> [B * T, X, D]: the token stream the kernel expects.
  auto stream = [](const torch::Tensor& t) {
    return t.transpose(1, 2).reshape({t.size(0) * t.size(2), t.size(1), t.size(3)});
  };
  // Flash's window reaches window_size_left keys back from the query (and none ahead, causal).
  // -1 reaches every earlier key, as no window does.
  const int64_t left = variant.window > 0 ? variant.window - 1 : -1, right = 0;
  auto out = std::get<0>(at::_flash_attention_forward(stream(q), stream(k), stream(v), bounds, bounds, longest,
                                                      longest, /*dropout_p=*/0.0, /*is_causal=*/true,
                                                      /*return_debug_mask=*/false, variant.softmax_scale(dim), left,
                                                      right));
  return out.view({batch, seq, heads, dim}).transpose(1, 2);
}

}  // namespace

bool varlen_attention_available(const torch::Device& device, torch::ScalarType dtype) {
  return device.is_cuda() && (dtype == torch::kBFloat16 || dtype == torch::kHalf);
}

torch::Tensor sdpa_causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                    const torch::Tensor& cu_seqlens, int64_t block_size,
                                    const AttentionVariant& variant) {
  variant.check(q.size(1));
  const int64_t seq = q.size(2);
  if (cu_seqlens.defined()) {
    const bool flash_takes = !variant.has_sinks() && v.size(3) == q.size(3);
    if (flash_takes && varlen_attention_available(q.device(), q.scalar_type()))
      return varlen_attention(q, k, v, cu_seqlens, variant);
    return blockwise_causal_attention(q, k, v, cu_seqlens, block_size, variant);
  }
  // A window that covers the whole row hides nothing.
  if (variant.has_sinks() || (variant.window > 0 && variant.window < seq))
    return blockwise_causal_attention(q, k, v, cu_seqlens, block_size, variant);
  return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0, /*is_causal=*/true,
                                          variant.softmax_scale(q.size(3)), /*enable_gqa=*/k.size(1) != q.size(1));
}

}  // namespace xtrain::model
