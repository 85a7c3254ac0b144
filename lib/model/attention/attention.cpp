#include "model/attention/attention.h"

#include <cmath>
#include <limits>
#include <tuple>

#include <torch/torch.h>

#include "model/kernels/fp16_emulation.h"
#include "model/kernels/fused_rotary.h"
#include "model/layers/parameter_source.h"
#include "model/kernels/widened_gemm.h"
#include "util/numeric_fault.h"

namespace xtrain::model {

torch::Tensor document_ids(const torch::Tensor& cu_seqlens, int64_t seq) {
  TORCH_CHECK(cu_seqlens.dim() == 1 && cu_seqlens.scalar_type() == torch::kInt64,
              "cu_seqlens must be a 1-D int64 tensor, got ", cu_seqlens.dim(), "-D ", cu_seqlens.scalar_type());
  TORCH_CHECK(cu_seqlens.numel() >= 2, "cu_seqlens must hold at least [0, seq_len], got ", cu_seqlens.numel(),
              " entries");
  auto bounds = cu_seqlens.to(torch::kCPU).contiguous();
  const int64_t* b = bounds.data_ptr<int64_t>();
  const int64_t n = bounds.numel();
  TORCH_CHECK(b[0] == 0, "cu_seqlens must start at 0, got ", b[0]);
  TORCH_CHECK(b[n - 1] == seq, "cu_seqlens must end at the sequence length ", seq, ", got ", b[n - 1]);
  for (int64_t i = 1; i < n; ++i)
    TORCH_CHECK(b[i] >= b[i - 1], "cu_seqlens must be non-decreasing, got ", b[i], " after ", b[i - 1],
                " at index ", i);
  // Position p lies in document d when cu_seqlens[d] <= p < cu_seqlens[d + 1]: d counts the
  // inner boundaries at or below p (right=true), which also steps over empty documents.
  return torch::bucketize(torch::arange(seq, torch::kInt64), bounds.narrow(0, 1, n - 1), /*out_int32=*/false,
                          /*right=*/true);
}

double AttentionVariant::softmax_scale(int64_t dim) const {
  return scale != 0 ? scale : 1.0 / std::sqrt(static_cast<double>(dim));
}

void AttentionVariant::check(int64_t heads) const {
  TORCH_CHECK(window >= 0, "the attention window must be 0 (none) or positive, got ", window);
  TORCH_CHECK(!sinks.defined() || (sinks.dim() == 1 && sinks.size(0) == heads), "attention sinks must be [", heads,
              "], one per query head, got ", sinks.defined() ? sinks.sizes() : torch::IntArrayRef{});
}

// Attention over [T, S] scores; hidden (bool, broadcastable to [B, H, T, S]) marks the keys a
// query must not see.
torch::Tensor masked_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const torch::Tensor& hidden, const AttentionVariant& variant) {
  const int64_t groups = q.size(1) / k.size(1);
  auto keys = groups == 1 ? k : k.repeat_interleave(groups, /*dim=*/1);
  auto values = groups == 1 ? v : v.repeat_interleave(groups, /*dim=*/1);
  // The scores are scaled after the product, in transformers' eager order: with a head size
  // whose 1/sqrt is not a power of two (qwen3's head_dim 128 is one), scaling q first rounds
  // differently. The fused kernels (sdpa, blockwise) are the fast paths.
  auto scores = widened_matmul(q, keys.transpose(-2, -1)) * variant.softmax_scale(q.size(-1));
  scores.masked_fill_(hidden, -std::numeric_limits<float>::infinity());
  if (variant.observe_logit_max)
    variant.observe_logit_max(scores.detach().amax({0, 2, 3}).to(torch::kFloat32));
  // Softmax in at least fp32: bf16/fp16 scores lose too much in the exponent sum.
  const auto stats_type = at::promote_types(scores.scalar_type(), torch::kFloat32);
  torch::Tensor probs;
  if (variant.has_sinks()) {  // GPT-OSS: the sink is one more column of each row, then dropped
    const auto sink = variant.sinks.to(stats_type).view({1, -1, 1, 1}).expand({scores.size(0), -1, scores.size(2), 1});
    probs = torch::softmax(torch::cat({scores.to(stats_type), sink}, -1), -1).narrow(-1, 0, scores.size(-1));
  } else {
    probs = torch::softmax(scores, -1, stats_type);
  }
  return widened_matmul(probs.to(q.scalar_type()), values);
}

namespace {

// [T, T] on `device`: true where the key is after the query or, with a window, `window` or
// more positions before it.
torch::Tensor unreachable_keys(int64_t seq, int64_t window, const torch::Device& device) {
  const auto all = torch::ones({seq, seq}, torch::TensorOptions().dtype(torch::kBool).device(device));
  auto hidden = all.triu(1);
  return window > 0 ? hidden.logical_or_(all.tril(-window)) : hidden;
}

// [..., T, T] on doc's device: unreachable or between different documents.
torch::Tensor hidden_keys(const torch::Tensor& doc, int64_t window) {
  return unreachable_keys(doc.size(-1), window, doc.device()).logical_or(doc.unsqueeze(-1) != doc.unsqueeze(-2));
}

// Packed rows are cut at document boundaries into segments of up to this many tokens (or one
// longer document), and each run of equally long segments is attended as a batch: the scores
// then cost about the sum of the segments' squares instead of the square of the row.
constexpr int64_t kSegmentTokens = 256;

// [first, length) of each segment.
std::vector<std::pair<int64_t, int64_t>> segments_of(const int64_t* bounds, int64_t n) {
  std::vector<std::pair<int64_t, int64_t>> segments;
  int64_t begin = 0;
  for (int64_t i = 1; i < n; ++i) {
    const bool last = i + 1 == n;
    if (!last && bounds[i + 1] - begin <= kSegmentTokens) continue;  // the next document fits too
    if (bounds[i] == begin) continue;                                  // only empty documents so far
    segments.emplace_back(begin, bounds[i] - begin);
    begin = bounds[i];
  }
  return segments;
}

// q, k, v [B, X, count * length, D] -> [B * count, X, length, D].
torch::Tensor split_segments(const torch::Tensor& t, int64_t count, int64_t length) {
  return t.reshape({t.size(0), t.size(1), count, length, t.size(3)}).transpose(1, 2).reshape(
      {t.size(0) * count, t.size(1), length, t.size(3)});
}

}  // namespace

torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const torch::Tensor& cu_seqlens, const AttentionVariant& variant) {
  variant.check(q.size(1));
  const int64_t seq = q.size(2), window = variant.window;
  if (!cu_seqlens.defined()) return masked_attention(q, k, v, unreachable_keys(seq, window, q.device()), variant);
  const auto doc = document_ids(cu_seqlens, seq).to(q.device());  // validates, on the host
  if (seq <= kSegmentTokens) return masked_attention(q, k, v, hidden_keys(doc, window), variant);
  const auto bounds = cu_seqlens.to(torch::kCPU).contiguous();
  const auto segments = segments_of(bounds.data_ptr<int64_t>(), bounds.numel());
  const int64_t batch = q.size(0), value_dim = v.size(3);
  std::vector<torch::Tensor> outputs;
  for (size_t first = 0; first < segments.size();) {
    const auto [begin, length] = segments[first];
    size_t end = first + 1;
    while (end < segments.size() && segments[end].second == length) ++end;
    const auto count = static_cast<int64_t>(end - first);
    auto part = [&](const torch::Tensor& t) { return split_segments(t.narrow(2, begin, count * length), count, length); };
    // Segments start at document boundaries: positions within one differ as in the row.
    auto hidden = hidden_keys(doc.narrow(0, begin, count * length).view({count, length}), window)
                      .unsqueeze(1)
                      .repeat({batch, 1, 1, 1});
    auto out = masked_attention(part(q), part(k), part(v), hidden, variant);  // [B * count, H, length, Dv]
    outputs.push_back(out.reshape({batch, count, q.size(1), length, value_dim})
                          .transpose(1, 2)
                          .reshape({batch, q.size(1), count * length, value_dim}));
    first = end;
  }
  return outputs.size() == 1 ? outputs.front() : torch::cat(outputs, 2);
}

AttentionImpl::AttentionImpl(const ModelConfig& config, const AttentionFeatures& features, int64_t layer)
    : num_heads_(config.num_heads),
      num_kv_heads_(config.num_kv_heads),
      head_dim_(config.head_dim()),
      window_(config.window_of(layer)) {
  const bool bias = features.qkv_bias;
  q_proj = register_module("q_proj", Linear(config.hidden_size, num_heads_ * head_dim_, bias));
  k_proj = register_module("k_proj", Linear(config.hidden_size, num_kv_heads_ * head_dim_, bias));
  v_proj = register_module("v_proj", Linear(config.hidden_size, num_kv_heads_ * head_dim_, bias));
  o_proj = register_module("o_proj", Linear(num_heads_ * head_dim_, config.hidden_size, features.o_bias));
  if (features.qk_norm) {
    q_norm = register_module("q_norm", RMSNorm(head_dim_, config.norm_eps));
    k_norm = register_module("k_norm", RMSNorm(head_dim_, config.norm_eps));
  }
}

void AttentionImpl::describe_init(const std::string& name, double std, double output_std, InitPlan& plan) const {
  q_proj->describe_init(name + ".q_proj", std, plan);
  k_proj->describe_init(name + ".k_proj", std, plan);
  v_proj->describe_init(name + ".v_proj", std, plan);
  o_proj->describe_init(name + ".o_proj", output_std, plan);
  if (q_norm) q_norm->describe_init(name + ".q_norm", plan);
  if (k_norm) k_norm->describe_init(name + ".k_norm", plan);
}

std::pair<torch::Tensor, torch::Tensor> AttentionImpl::rotate(const torch::Tensor& q, const torch::Tensor& k,
                                                              const RotaryTables& rotary, const SequenceLayout& layout,
                                                              int64_t query_shift) const {
  const int64_t seq = q.size(2);
  const auto cos = rotary_rows(rotary.cos, layout, seq, 0), sin = rotary_rows(rotary.sin, layout, seq, 0);
  if (query_shift == 0 && fused_rotary && fused_rotary_applies(q, k, cos, sin)) return model::fused_rotary(q, k, cos, sin);
  const auto rotated_q = query_shift == 0 ? apply_rotary(q, cos, sin)
                                          : apply_rotary(q, rotary_rows(rotary.cos, layout, seq, query_shift),
                                                         rotary_rows(rotary.sin, layout, seq, query_shift));
  return {rotated_q, apply_rotary(k, cos, sin)};
}

void AttentionImpl::set_fused_kernels(bool fused) {
  fused_rotary = fused;
  if (q_norm) q_norm->set_fused_kernels(fused);
  if (k_norm) k_norm->set_fused_kernels(fused);
}

TensorParallelPlan AttentionImpl::tensor_parallel_plan(int64_t rank, int64_t ranks) const {
  TORCH_CHECK(num_heads_ % ranks == 0 && (num_kv_heads_ % ranks == 0 || ranks % num_kv_heads_ == 0), num_heads_,
              " query and ", num_kv_heads_, " key/value heads do not split over ", ranks, " tensor-parallel ranks");
  const auto heads = [&](int64_t count) {
    const auto share = split_share(count, rank, ranks);
    return SplitShare{share.first * head_dim_, share.count * head_dim_};
  };
  TensorParallelPlan plan = {{"q_proj.weight", {0, heads(num_heads_)}}, {"o_proj.weight", {1, heads(num_heads_)}}};
  if (q_proj->bias.defined()) plan["q_proj.bias"] = {0, heads(num_heads_)};
  if (num_kv_heads_ % ranks == 0)
    for (const auto* name : {"k_proj", "v_proj"}) {
      plan[std::string(name) + ".weight"] = {0, heads(num_kv_heads_)};
      if (k_proj->bias.defined()) plan[std::string(name) + ".bias"] = {0, heads(num_kv_heads_)};
    }
  return plan;
}

void AttentionImpl::use_tensor_parallel(std::shared_ptr<TensorParallelOps> ops) {
  if (num_kv_heads_ % ops->size() != 0) replicated_kv_head_ = ops->rank() * num_kv_heads_ / ops->size();
  // Each rank normalises its own heads: the gains' gradients are partial.
  if (q_norm) q_norm->partial_gradient = ops;
  if (k_norm) k_norm->partial_gradient = ops;
  tensor_parallel_ = std::move(ops);
}

torch::Tensor AttentionImpl::key_value(const Linear& projection, const torch::Tensor& x) const {
  if (replicated_kv_head_ < 0) return projection->project_with(x, projection->weight, projection->bias);
  // Every rank holds every kv head and uses one: the others' gradients come from the ranks that
  // use them, summed by shared().
  const auto rows = [&](const torch::Tensor& t) {
    return tensor_parallel_->shared(t).narrow(0, replicated_kv_head_ * head_dim_, head_dim_);
  };
  return projection->project_with(x, rows(projection->weight),
                                  projection->bias.defined() ? rows(projection->bias) : torch::Tensor());
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& whole, const RotaryTables& rotary,
                                     const SequenceLayout& layout) {
  if (cache.cache) return cached_forward(whole, rotary);
  const auto x = tensor_parallel_ ? tensor_parallel_->enter(whole) : whole;
  const int64_t batch = x.size(0), seq = x.size(1);
  auto heads = [&](const torch::Tensor& t) { return t.view({batch, seq, -1, head_dim_}).transpose(1, 2); };
  const int64_t query_shift = util::numeric_fault().is(util::NumericFaultKind::rope_shift) ? 1 : 0;
  auto q = heads(q_proj(x)), k = heads(key_value(k_proj, x));
  if (q_norm) {  // over each head's features, as qwen3 does before the rotation
    q = q_norm(q);
    k = k_norm(k);
  }
  std::tie(q, k) = rotate(q, k, rotary, layout, query_shift);
  auto v = heads(key_value(v_proj, x));
  TORCH_CHECK(kernel || !layout.context, "a row split over context-parallel ranks needs a context-parallel kernel");
  const auto variant = this->variant();
  auto attended = kernel ? kernel(q, k, v, layout, variant) : causal_attention(q, k, v, layout.cu_seqlens, variant);
  return output(attended.transpose(1, 2).reshape({batch, seq, -1}));
}

torch::Tensor AttentionImpl::cached_forward(const torch::Tensor& x, const RotaryTables& rotary) {
  TORCH_CHECK(!tensor_parallel_, "a key/value cache under tensor parallelism (parallel.tp) is not supported");
  auto& kv = *cache.cache;
  const int64_t batch = x.size(0), seq = x.size(1);
  auto heads = [&](const torch::Tensor& t) { return t.view({batch, seq, -1, head_dim_}).transpose(1, 2); };
  auto q = heads(q_proj(x)), k = heads(key_value(k_proj, x));
  if (q_norm) {
    q = q_norm(q);
    k = k_norm(k);
  }
  // Each row's own positions: [B, 1, T, D] tables broadcast over the heads.
  const auto at = kv.positions().to(rotary.cos.device()).reshape({-1});
  auto rows = [&](const torch::Tensor& table) { return table.index_select(0, at).view({batch, 1, seq, -1}); };
  const auto cos = rows(rotary.cos), sin = rows(rotary.sin);
  const auto [keys, values] = kv.append(cache.layer, apply_rotary(k, cos, sin), heads(key_value(v_proj, x)));
  const auto variant = this->variant();
  const auto attended = masked_attention(apply_rotary(q, cos, sin), keys, values,
                                         kv.hidden(variant.window).to(x.device()), variant);
  return output(attended.transpose(1, 2).reshape({batch, seq, -1}));
}

AttentionVariant AttentionImpl::variant() const {
  AttentionVariant variant;
  variant.window = window_;
  if (record_logit_max_ && is_training()) {
    // The variant reaches the kernel by value (and a recomputed kernel's replay): the running max
    // lives here. const: variant() is const, the record is not part of the module's state.
    auto* self = const_cast<AttentionImpl*>(this);
    variant.observe_logit_max = [self](const torch::Tensor& heads) {
      self->logit_max_ = self->logit_max_.defined() ? torch::maximum(self->logit_max_, heads) : heads.clone();
    };
  }
  return variant;
}

std::string AttentionImpl::qk_clip_refusal() const {
  return q_norm ? "normalised after its projections (q/k norm)" : "";
}

torch::Tensor AttentionImpl::take_logit_max() {
  auto taken = logit_max_.defined() ? logit_max_
                                    : torch::full({num_heads_ / (tensor_parallel_ ? tensor_parallel_->size() : 1)},
                                                  -std::numeric_limits<float>::infinity());
  logit_max_ = torch::Tensor();
  return taken;
}

// Row-parallel: the ranks' partial sums are added, then the bias, once. With sequence
// parallelism each rank adds it to its part of the sequence, and its gradient is partial.
torch::Tensor AttentionImpl::output(const torch::Tensor& attended) {
  if (!tensor_parallel_) return o_proj(attended);
  auto out = tensor_parallel_->leave(o_proj->project_with(attended, o_proj->weight, torch::Tensor()));
  if (!o_proj->bias.defined()) return out;
  return out + (tensor_parallel_->sequence_parallel() ? tensor_parallel_->shared(o_proj->bias) : o_proj->bias);
}

void AttentionImpl::float8_layers(const std::string& name, Float8Layers& layers) {
  layers.linears.emplace_back(module_name(name, "q_proj"), q_proj.get());
  layers.linears.emplace_back(module_name(name, "k_proj"), k_proj.get());
  layers.linears.emplace_back(module_name(name, "v_proj"), v_proj.get());
  layers.linears.emplace_back(module_name(name, "o_proj"), o_proj.get());
}

}  // namespace xtrain::model
