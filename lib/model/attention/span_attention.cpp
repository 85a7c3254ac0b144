#include "model/attention/span_attention.h"

#include <algorithm>
#include <limits>

#include <torch/torch.h>

#include "model/kernels/widened_gemm.h"

namespace xtrain::model {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

std::vector<SpanTiles::Tile> cut(const std::vector<TokenSpan>& spans, int64_t block) {
  std::vector<SpanTiles::Tile> tiles;
  int64_t local = 0;
  for (const auto& span : spans) {
    for (int64_t first = 0; first < span.length; first += block)
      tiles.push_back({local + first, span.begin + first, std::min(block, span.length - first)});
    local += span.length;
  }
  return tiles;
}

// [B, KV, G, T, ...] -> rows [start, start + len) of all G query heads of each kv group, as
// [B, KV, G * len, ...]: one batched matmul against the group's k then serves all of them.
torch::Tensor group_rows(const torch::Tensor& t, int64_t start, int64_t len) {
  std::vector<int64_t> shape{t.size(0), t.size(1), t.size(2) * len};
  for (int64_t d = 4; d < t.dim(); ++d) shape.push_back(t.size(d));
  return t.narrow(3, start, len).reshape(shape);
}

// Masks scores [B, KV, G * q.length, k.length] of a tile in place.
void mask_tile(torch::Tensor& scores, const SpanTiles& tiles, const SpanTiles::Tile& q, const SpanTiles::Tile& k) {
  auto hidden = tiles.hidden(q, k);
  if (!hidden.defined()) return;
  scores.view({scores.size(0), scores.size(1), -1, q.length, k.length}).masked_fill_(hidden, kNegInf);
}

}  // namespace

SpanTiles::SpanTiles(const std::vector<TokenSpan>& queries, const std::vector<TokenSpan>& keys,
                     const std::vector<int64_t>& bounds, int64_t block, const torch::Device& device, int64_t window)
    : queries_(cut(queries, block)),
      keys_(cut(keys, block)),
      bounds_(bounds),
      window_(window),
      doc_(static_cast<size_t>(bounds.back())),
      index_options_(torch::TensorOptions().dtype(torch::kInt64).device(device)) {
  for (size_t d = 0; d + 1 < bounds_.size(); ++d)
    std::fill(doc_.begin() + bounds_[d], doc_.begin() + bounds_[d + 1], static_cast<int64_t>(d));
  if (bounds_.size() > 2) doc_ids_ = torch::tensor(doc_).to(device);
}

bool SpanTiles::skipped(const Tile& q, const Tile& k) const {
  const int64_t last_query = q.row + q.length - 1, last_key = k.row + k.length - 1;
  // Every key after every query, every key in a document before the first query's, or every key
  // a window or more before the first query.
  return k.row > last_query || doc_[static_cast<size_t>(last_key)] < doc_[static_cast<size_t>(q.row)] ||
         (window_ > 0 && last_key <= q.row - window_);
}

bool SpanTiles::visits(const Tile& q, const Tile& k) const {
  if (skipped(q, k)) return false;
  ++visited_;
  return true;
}

torch::Tensor SpanTiles::hidden(const Tile& q, const Tile& k) const {
  const int64_t last_query = q.row + q.length - 1, last_key = k.row + k.length - 1;
  const bool within_window = window_ == 0 || k.row > last_query - window_;
  if (last_key <= q.row && within_window && doc_[static_cast<size_t>(k.row)] == doc_[static_cast<size_t>(last_query)])
    return {};
  auto queries = torch::arange(q.row, q.row + q.length, index_options_).unsqueeze(1);
  auto keys = torch::arange(k.row, k.row + k.length, index_options_).unsqueeze(0);
  auto mask = keys > queries;
  if (!within_window) mask.logical_or_(queries - keys >= window_);
  if (doc_ids_.defined())
    mask.logical_or_(doc_ids_.narrow(0, q.row, q.length).unsqueeze(1) != doc_ids_.narrow(0, k.row, k.length).unsqueeze(0));
  return mask;
}

bool SpanTiles::any_visible() const {
  for (const auto& q : queries_)
    for (const auto& k : keys_)
      if (!skipped(q, k)) return true;
  return false;
}

torch::Tensor scaled_queries(const torch::Tensor& q, int64_t kv_heads, torch::ScalarType stats_type, double scale) {
  return (q.to(stats_type) * scale)
      .to(q.scalar_type())
      .contiguous()
      .view({q.size(0), kv_heads, q.size(1) / kv_heads, q.size(2), q.size(3)});
}

TileBackward tile_backward(const torch::Tensor& q, int64_t kv_heads, const torch::Tensor& output,
                           const torch::Tensor& grad, torch::ScalarType stats_type, double scale) {
  auto grouped = [&](const torch::Tensor& t) {  // q, or dout and output with v's head dim
    return t.contiguous().view({q.size(0), kv_heads, q.size(1) / kv_heads, q.size(2), t.size(3)});
  };
  TileBackward inputs;
  inputs.qs = scaled_queries(q, kv_heads, stats_type, scale);
  inputs.dout = grouped(grad.to(q.scalar_type()));
  inputs.delta = (inputs.dout.to(stats_type) * grouped(output.to(stats_type))).sum(-1);
  inputs.dq = torch::zeros(inputs.qs.sizes(), q.options().dtype(stats_type));
  inputs.scale = scale;
  return inputs;
}

torch::Tensor TileBackward::query_gradient(const torch::Tensor& q) const {
  return dq.mul(scale).view(q.sizes()).to(q.scalar_type());
}

void add_sinks(const torch::Tensor& out, const torch::Tensor& lse, const torch::Tensor& sinks) {
  const auto total = torch::logaddexp(lse, sinks.to(lse.scalar_type()).view({1, -1, 1}));
  out.mul_((lse - total).exp_().unsqueeze(-1));
  lse.copy_(total);
}

torch::Tensor sink_gradient(const torch::Tensor& sinks, const torch::Tensor& lse, const torch::Tensor& delta) {
  const auto sink_probability = (sinks.to(lse.scalar_type()).view({1, -1, 1}) - lse).exp_();
  return sink_probability.mul_(delta).sum(torch::IntArrayRef{0, 2}).neg_().to(sinks.scalar_type());
}

void attend_tiles(const SpanTiles& tiles, const torch::Tensor& qs, const torch::Tensor& k, const torch::Tensor& v,
                  torch::Tensor& out, torch::Tensor& lse) {
  const int64_t batch = qs.size(0), kv_heads = qs.size(1), groups = qs.size(2), dim = v.size(3);
  const auto matmul_type = qs.scalar_type();
  const auto options = out.options();
  const auto stats_type = out.scalar_type();
  for (const auto& q : tiles.query_tiles()) {
    auto qb = group_rows(qs, q.local, q.length);
    auto row_max = torch::full({batch, kv_heads, groups * q.length}, kNegInf, options);
    auto row_sum = torch::zeros({batch, kv_heads, groups * q.length}, options);
    auto acc = torch::zeros({batch, kv_heads, groups * q.length, dim}, options);
    for (const auto& key : tiles.key_tiles()) {
      if (!tiles.visits(q, key)) continue;
      auto p = widened_matmul(qb, k.narrow(2, key.local, key.length).transpose(-2, -1)).to(stats_type);
      mask_tile(p, tiles, q, key);
      auto new_max = torch::maximum(row_max, p.amax(-1));
      // A row that has seen no visible key yet keeps a -inf max; shifting it by 0 instead makes
      // its exps 0 rather than NaN (-inf - -inf).
      auto shift = new_max.masked_fill(new_max == kNegInf, 0);
      p.sub_(shift.unsqueeze(-1)).exp_();
      auto rescale = (row_max - shift).exp_();
      row_sum.mul_(rescale).add_(p.sum(-1));
      acc.mul_(rescale.unsqueeze(-1)).add_(widened_matmul(p.to(matmul_type), v.narrow(2, key.local, key.length)));
      row_max = new_max;
    }
    // A row that saw a key has row_sum >= 1 (its largest term is exp(0)); one that saw none has
    // acc 0 and keeps 0 (lse: -inf + log 0 = -inf).
    out.narrow(3, q.local, q.length)
        .copy_(acc.div_(row_sum.clamp_min(1).unsqueeze(-1)).view({batch, kv_heads, groups, q.length, dim}));
    lse.narrow(3, q.local, q.length).copy_(row_max.add_(row_sum.log_()).view({batch, kv_heads, groups, q.length}));
  }
}

void attend_tiles_backward(const SpanTiles& tiles, const torch::Tensor& qs, const torch::Tensor& dout,
                           const torch::Tensor& lse, const torch::Tensor& delta, const torch::Tensor& k,
                           const torch::Tensor& v, torch::Tensor& dq, torch::Tensor& dk, torch::Tensor& dv) {
  const int64_t batch = qs.size(0), kv_heads = qs.size(1), dim = qs.size(4);
  const auto matmul_type = qs.scalar_type();
  const auto stats_type = lse.scalar_type();
  // Key tiles outermost: dk, dv of a tile accumulate over its query tiles, dq over its keys.
  for (const auto& key : tiles.key_tiles()) {
    auto kb = k.narrow(2, key.local, key.length), vb = v.narrow(2, key.local, key.length);
    auto dkb = dk.narrow(2, key.local, key.length), dvb = dv.narrow(2, key.local, key.length);
    for (const auto& q : tiles.query_tiles()) {
      if (!tiles.visits(q, key)) continue;
      auto qb = group_rows(qs, q.local, q.length), dob = group_rows(dout, q.local, q.length);
      auto p = widened_matmul(qb, kb.transpose(-2, -1)).to(stats_type);
      mask_tile(p, tiles, q, key);
      p.sub_(group_rows(lse, q.local, q.length).unsqueeze(-1)).exp_();
      dvb.add_(widened_matmul(p.to(matmul_type).transpose(-2, -1), dob));
      // dS = P (dP - delta): delta is the term of the softmax Jacobian shared by a whole row.
      auto ds = widened_matmul(dob, vb.transpose(-2, -1)).to(stats_type);
      ds.sub_(group_rows(delta, q.local, q.length).unsqueeze(-1)).mul_(p);
      auto ds_mm = ds.to(matmul_type);
      dkb.add_(widened_matmul(ds_mm.transpose(-2, -1), qb));
      dq.narrow(3, q.local, q.length).add_(widened_matmul(ds_mm, kb).view({batch, kv_heads, -1, q.length, dim}));
    }
  }
}

}  // namespace xtrain::model
