#include "model/attention/blockwise_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "model/attention/attention.h"
#include "model/attention/span_attention.h"

namespace xtrain::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

std::vector<int64_t> checked_bounds(const torch::Tensor& cu_seqlens, int64_t seq) {
  if (!cu_seqlens.defined()) return {0, seq};
  document_ids(cu_seqlens, seq);  // validates
  auto bounds = cu_seqlens.to(torch::kCPU).contiguous();
  return {bounds.data_ptr<int64_t>(), bounds.data_ptr<int64_t>() + bounds.numel()};
}

// What forward hands backward beside the tensors.
struct BlockwisePlan {
  std::vector<int64_t> bounds;  // the validated cu_seqlens, [0, seq] for a single document
  int64_t block_size = 256;
  double scale = 0;
  int64_t window = 0;
  bool sinks = false;  // whether the sinks argument holds the sinks (autograd takes no undefined tensor)

  SpanTiles tiles(int64_t seq, const torch::Device& device) const {
    return {{{0, seq}}, {{0, seq}}, bounds, block_size, device, window};
  }
};

struct BlockwiseAttention : torch::autograd::Function<BlockwiseAttention> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& sinks, const BlockwisePlan& plan) {
    const int64_t batch = q.size(0), heads = q.size(1), kv_heads = k.size(1), seq = q.size(2), dim = v.size(3);
    const int64_t groups = heads / kv_heads;
    const auto tiles = plan.tiles(seq, q.device());

    // Tile matmuls run in the inputs' dtype (bf16 GEMMs for bf16 inputs); the softmax statistics
    // and the accumulators stay in at least fp32, as flash attention keeps them.
    const auto stats_type = at::promote_types(q.scalar_type(), torch::kFloat32);
    auto qs = scaled_queries(q, kv_heads, stats_type, plan.scale);
    auto options = q.options().dtype(stats_type);
    auto out = torch::empty({batch, heads, seq, dim}, options);
    auto lse = torch::empty({batch, heads, seq}, options);
    // Head h = j * groups + g of kv group j: the [B, KV, G, T] views address whole groups.
    auto out_g = out.view({batch, kv_heads, groups, seq, dim});
    auto lse_g = lse.view({batch, kv_heads, groups, seq});

    attend_tiles(tiles, qs, k, v, out_g, lse_g);
    if (plan.sinks) add_sinks(out, lse, sinks);

    auto output = out.to(q.scalar_type());
    ctx->save_for_backward({q, k, v, output, lse, sinks});
    ctx->saved_data["bounds"] = plan.bounds;
    ctx->saved_data["block_size"] = plan.block_size;
    ctx->saved_data["scale"] = plan.scale;
    ctx->saved_data["window"] = plan.window;
    ctx->saved_data["sinks"] = plan.sinks;
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2], &output = saved[3], &lse = saved[4], &sinks = saved[5];
    const int64_t batch = q.size(0), kv_heads = k.size(1), seq = q.size(2);
    BlockwisePlan plan{ctx->saved_data["bounds"].toIntVector(), ctx->saved_data["block_size"].toInt(),
                       ctx->saved_data["scale"].toDouble(), ctx->saved_data["window"].toInt(),
                       ctx->saved_data["sinks"].toBool()};
    const auto tiles = plan.tiles(seq, q.device());

    auto inputs = tile_backward(q, kv_heads, output, grad_outputs[0], lse.scalar_type(), plan.scale);
    auto lse_g = lse.view({batch, kv_heads, -1, seq});
    auto dk = torch::zeros(k.sizes(), lse.options());
    auto dv = torch::zeros(v.sizes(), lse.options());
    attend_tiles_backward(tiles, inputs.qs, inputs.dout, lse_g, inputs.delta, k, v, inputs.dq, dk, dv);
    auto dsinks = plan.sinks ? sink_gradient(sinks, lse, inputs.delta.view(lse.sizes())) : torch::Tensor();
    return {inputs.query_gradient(q), dk.to(k.scalar_type()), dv.to(v.scalar_type()), dsinks, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor blockwise_causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                         const torch::Tensor& cu_seqlens, int64_t block_size,
                                         const AttentionVariant& variant) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, "q, k, v must be [B, heads, T, D]");
  TORCH_CHECK(k.sizes().slice(0, 3) == v.sizes().slice(0, 3), "k and v must agree in batch, heads and sequence, got ",
              k.sizes(), " and ", v.sizes());
  TORCH_CHECK(q.size(0) == k.size(0) && q.size(2) == k.size(2) && q.size(3) == k.size(3),
              "q ", q.sizes(), " and k ", k.sizes(), " must agree in batch, sequence and head_dim");
  TORCH_CHECK(k.size(1) > 0 && q.size(1) % k.size(1) == 0, "query heads (", q.size(1),
              ") must be a multiple of kv heads (", k.size(1), ")");
  TORCH_CHECK(q.scalar_type() == k.scalar_type() && q.scalar_type() == v.scalar_type(),
              "q, k, v must share one dtype");
  TORCH_CHECK(block_size > 0, "block_size must be positive, got ", block_size);
  variant.check(q.size(1));
  // cu_seqlens travels as a plain vector: autograd would reject an undefined tensor argument.
  const BlockwisePlan plan{checked_bounds(cu_seqlens, q.size(2)), block_size, variant.softmax_scale(q.size(3)),
                           variant.window, variant.has_sinks()};
  const auto sinks = variant.has_sinks() ? variant.sinks : torch::empty({0}, q.options().dtype(torch::kFloat32));
  return BlockwiseAttention::apply(q, k, v, sinks, plan);
}

}  // namespace xtrain::model
