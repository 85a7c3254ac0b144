#include "model/blockwise_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "model/attention.h"

namespace xtrain::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// The tiling of one sequence into blocks and the document structure that decides which tiles
// are computed, skipped or masked. Queries and keys share the same blocks.
class Tiling {
 public:
  // Masks are made on `device`, where the tiles are.
  Tiling(int64_t seq, int64_t block, std::vector<int64_t> bounds, const torch::Device& device)
      : seq_(seq), block_(block), bounds_(std::move(bounds)), doc_(seq), index_options_(torch::TensorOptions().dtype(torch::kInt64).device(device)) {
    for (size_t d = 0; d + 1 < bounds_.size(); ++d)
      for (int64_t p = bounds_[d]; p < bounds_[d + 1]; ++p) doc_[p] = static_cast<int64_t>(d);
    if (bounds_.size() > 2) doc_ids_ = torch::tensor(doc_).to(device);
  }

  int64_t count() const { return (seq_ + block_ - 1) / block_; }
  int64_t begin(int64_t i) const { return i * block_; }
  int64_t length(int64_t i) const { return std::min(block_, seq_ - begin(i)); }

  // Key blocks [first_key_block(i), i] hold every key that a query of block i may see: keys
  // before the start of the first query's document are hidden from the whole block.
  int64_t first_key_block(int64_t i) const { return bounds_[doc_[begin(i)]] / block_; }
  // Query blocks [j, last_query_block(j)] hold every query that may see a key of block j: none
  // beyond the end of the last key's document.
  int64_t last_query_block(int64_t j) const {
    const int64_t last_key = begin(j) + length(j) - 1;
    return (bounds_[doc_[last_key] + 1] - 1) / block_;
  }

  // [len_i, len_j] bool, true where query may not see key; undefined when the tile is fully
  // visible (wholly below the diagonal and inside one document), the common case.
  torch::Tensor hidden(int64_t i, int64_t j) const {
    const int64_t q0 = begin(i), qn = length(i), k0 = begin(j), kn = length(j);
    if (k0 + kn - 1 <= q0 && doc_[k0] == doc_[q0 + qn - 1]) return {};
    auto queries = torch::arange(q0, q0 + qn, index_options_).unsqueeze(1);
    auto keys = torch::arange(k0, k0 + kn, index_options_).unsqueeze(0);
    auto mask = keys > queries;
    if (doc_ids_.defined())
      mask.logical_or_(doc_ids_.narrow(0, q0, qn).unsqueeze(1) != doc_ids_.narrow(0, k0, kn).unsqueeze(0));
    return mask;
  }

 private:
  int64_t seq_, block_;
  std::vector<int64_t> bounds_;  // cu_seqlens
  std::vector<int64_t> doc_;     // document of each position
  torch::TensorOptions index_options_;
  torch::Tensor doc_ids_;  // the same as a tensor, only with more than one document
};

// [B, KV, G, T, ...] -> rows [start, start + len) of all G query heads of each kv group, as
// [B, KV, G * len, ...]: one batched matmul against the group's k then serves all of them.
torch::Tensor group_rows(const torch::Tensor& t, int64_t start, int64_t len) {
  std::vector<int64_t> shape{t.size(0), t.size(1), t.size(2) * len};
  for (int64_t d = 4; d < t.dim(); ++d) shape.push_back(t.size(d));
  return t.narrow(3, start, len).reshape(shape);
}

// Masks scores [B, KV, G * len_i, len_j] of tile (i, j) in place.
void mask_tile(torch::Tensor& scores, const Tiling& tiling, int64_t i, int64_t j) {
  auto hidden = tiling.hidden(i, j);
  if (!hidden.defined()) return;
  const int64_t qn = tiling.length(i), kn = tiling.length(j);
  scores.view({scores.size(0), scores.size(1), -1, qn, kn}).masked_fill_(hidden, kNegInf);
}

std::vector<int64_t> checked_bounds(const torch::Tensor& cu_seqlens, int64_t seq) {
  if (!cu_seqlens.defined()) return {0, seq};
  document_ids(cu_seqlens, seq);  // validates
  auto bounds = cu_seqlens.to(torch::kCPU).contiguous();
  return {bounds.data_ptr<int64_t>(), bounds.data_ptr<int64_t>() + bounds.numel()};
}

struct BlockwiseAttention : torch::autograd::Function<BlockwiseAttention> {
  // bounds: the validated cu_seqlens, [0, seq] for a single document.
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const std::vector<int64_t>& bounds, int64_t block_size) {
    const int64_t batch = q.size(0), heads = q.size(1), kv_heads = k.size(1), seq = q.size(2), dim = q.size(3);
    const int64_t groups = heads / kv_heads;
    const Tiling tiling(seq, block_size, bounds, q.device());

    // Tile matmuls run in the inputs' dtype (bf16 GEMMs for bf16 inputs); the softmax statistics
    // and the accumulators stay in at least fp32, as flash attention keeps them.
    const auto matmul_type = q.scalar_type();
    const auto stats_type = at::promote_types(matmul_type, torch::kFloat32);
    const double scale = 1.0 / std::sqrt(static_cast<double>(dim));
    auto qs = (q.to(stats_type) * scale).to(matmul_type).contiguous().view({batch, kv_heads, groups, seq, dim});
    auto options = q.options().dtype(stats_type);
    auto out = torch::empty({batch, heads, seq, dim}, options);
    auto lse = torch::empty({batch, heads, seq}, options);
    // Head h = j * groups + g of kv group j: the [B, KV, G, T] views address whole groups.
    auto out_g = out.view({batch, kv_heads, groups, seq, dim});
    auto lse_g = lse.view({batch, kv_heads, groups, seq});

    for (int64_t i = 0; i < tiling.count(); ++i) {
      const int64_t q0 = tiling.begin(i), qn = tiling.length(i);
      auto qb = group_rows(qs, q0, qn);
      auto row_max = torch::full({batch, kv_heads, groups * qn}, kNegInf, options);
      auto row_sum = torch::zeros({batch, kv_heads, groups * qn}, options);
      auto acc = torch::zeros({batch, kv_heads, groups * qn, dim}, options);
      for (int64_t j = tiling.first_key_block(i); j <= i; ++j) {
        const int64_t k0 = tiling.begin(j), kn = tiling.length(j);
        auto p = torch::matmul(qb, k.narrow(2, k0, kn).transpose(-2, -1)).to(stats_type);
        mask_tile(p, tiling, i, j);
        auto new_max = torch::maximum(row_max, p.amax(-1));
        // A row that has seen no visible key yet keeps a -inf max; shifting it by 0 instead makes
        // its exps 0 rather than NaN (-inf - -inf).
        auto shift = new_max.masked_fill(new_max == kNegInf, 0);
        p.sub_(shift.unsqueeze(-1)).exp_();
        auto rescale = (row_max - shift).exp_();
        row_sum.mul_(rescale).add_(p.sum(-1));
        acc.mul_(rescale.unsqueeze(-1)).add_(torch::matmul(p.to(matmul_type), v.narrow(2, k0, kn)));
        row_max = new_max;
      }
      // Every query sees at least itself, so row_sum > 0 and row_max is finite here.
      out_g.narrow(3, q0, qn).copy_(acc.div_(row_sum.unsqueeze(-1)).view({batch, kv_heads, groups, qn, dim}));
      lse_g.narrow(3, q0, qn).copy_(row_max.add_(row_sum.log_()).view({batch, kv_heads, groups, qn}));
    }

    auto output = out.to(q.scalar_type());
    ctx->save_for_backward({q, k, v, output, lse});
    ctx->saved_data["bounds"] = bounds;
    ctx->saved_data["block_size"] = block_size;
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2], &output = saved[3], &lse = saved[4];
    const int64_t batch = q.size(0), heads = q.size(1), kv_heads = k.size(1), seq = q.size(2), dim = q.size(3);
    const int64_t groups = heads / kv_heads;
    const Tiling tiling(seq, ctx->saved_data["block_size"].toInt(), ctx->saved_data["bounds"].toIntVector(),
                        q.device());

    const auto matmul_type = q.scalar_type();
    const auto stats_type = lse.scalar_type();
    const double scale = 1.0 / std::sqrt(static_cast<double>(dim));
    auto grouped = [&](const torch::Tensor& t) { return t.contiguous().view({batch, kv_heads, groups, seq, dim}); };
    auto qs = grouped((q.to(stats_type) * scale).to(matmul_type));
    auto dout = grouped(grad_outputs[0].to(matmul_type));
    auto lse_g = lse.view({batch, kv_heads, groups, seq});
    // delta = rowsum(dO * O) = sum_k P dP: the term of the softmax Jacobian shared by a whole row.
    auto delta = (dout.to(stats_type) * grouped(output.to(stats_type))).sum(-1);
    auto dq = torch::zeros(qs.sizes(), lse.options());
    auto dk = torch::zeros(k.sizes(), lse.options());
    auto dv = torch::zeros(v.sizes(), lse.options());

    // Key blocks outermost: dk, dv of a block accumulate over its query blocks, dq over its keys.
    for (int64_t j = 0; j < tiling.count(); ++j) {
      const int64_t k0 = tiling.begin(j), kn = tiling.length(j);
      auto kb = k.narrow(2, k0, kn), vb = v.narrow(2, k0, kn);
      auto dkb = dk.narrow(2, k0, kn), dvb = dv.narrow(2, k0, kn);
      for (int64_t i = j; i <= tiling.last_query_block(j); ++i) {
        const int64_t q0 = tiling.begin(i), qn = tiling.length(i);
        auto qb = group_rows(qs, q0, qn), dob = group_rows(dout, q0, qn);
        auto p = torch::matmul(qb, kb.transpose(-2, -1)).to(stats_type);
        mask_tile(p, tiling, i, j);
        p.sub_(group_rows(lse_g, q0, qn).unsqueeze(-1)).exp_();
        dvb.add_(torch::matmul(p.to(matmul_type).transpose(-2, -1), dob));
        auto ds = torch::matmul(dob, vb.transpose(-2, -1)).to(stats_type);
        ds.sub_(group_rows(delta, q0, qn).unsqueeze(-1)).mul_(p);
        auto ds_mm = ds.to(matmul_type);
        dkb.add_(torch::matmul(ds_mm.transpose(-2, -1), qb));
        dq.narrow(3, q0, qn).add_(torch::matmul(ds_mm, kb).view({batch, kv_heads, groups, qn, dim}));
      }
    }
    // Scores are (q * scale) k^T: dk already used the scaled q, dq takes the scale here.
    return {dq.mul_(scale).view({batch, heads, seq, dim}).to(q.scalar_type()), dk.to(k.scalar_type()),
            dv.to(v.scalar_type()), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor blockwise_causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                         const torch::Tensor& cu_seqlens, int64_t block_size) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, "q, k, v must be [B, heads, T, D]");
  TORCH_CHECK(k.sizes() == v.sizes(), "k and v must have the same shape, got ", k.sizes(), " and ", v.sizes());
  TORCH_CHECK(q.size(0) == k.size(0) && q.size(2) == k.size(2) && q.size(3) == k.size(3),
              "q ", q.sizes(), " and k ", k.sizes(), " must agree in batch, sequence and head_dim");
  TORCH_CHECK(k.size(1) > 0 && q.size(1) % k.size(1) == 0, "query heads (", q.size(1),
              ") must be a multiple of kv heads (", k.size(1), ")");
  TORCH_CHECK(q.scalar_type() == k.scalar_type() && q.scalar_type() == v.scalar_type(),
              "q, k, v must share one dtype");
  TORCH_CHECK(block_size > 0, "block_size must be positive, got ", block_size);
  // cu_seqlens travels as a plain vector: autograd would reject an undefined tensor argument.
  return BlockwiseAttention::apply(q, k, v, checked_bounds(cu_seqlens, q.size(2)), block_size);
}

}  // namespace xtrain::model
