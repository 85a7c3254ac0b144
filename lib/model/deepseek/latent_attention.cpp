#include "model/deepseek/latent_attention.h"

#include <cmath>
#include <tuple>

#include <torch/torch.h>

#include "util/numeric_fault.h"

namespace xtrain::model {

namespace {
// transformers builds the latent norms with DeepseekV3RMSNorm's default epsilon, not rms_norm_eps.
constexpr double kLatentNormEps = 1e-6;
}  // namespace

LatentAttentionImpl::LatentAttentionImpl(const ModelConfig& config)
    : latent_(config.latent), num_heads_(config.num_heads), rope_scaling_(config.rope_scaling) {
  const int64_t hidden = config.hidden_size, heads = num_heads_;
  if (latent_.q_lora_rank > 0) {
    q_a_proj = register_module("q_a_proj", Linear(hidden, latent_.q_lora_rank, false));
    q_a_layernorm = register_module("q_a_layernorm", RMSNorm(latent_.q_lora_rank, kLatentNormEps));
    q_b_proj = register_module("q_b_proj", Linear(latent_.q_lora_rank, heads * latent_.qk_head_dim(), false));
  } else {
    q_proj = register_module("q_proj", Linear(hidden, heads * latent_.qk_head_dim(), false));
  }
  kv_a_proj_with_mqa = register_module(
      "kv_a_proj_with_mqa", Linear(hidden, latent_.kv_lora_rank + latent_.qk_rope_head_dim, false));
  kv_a_layernorm = register_module("kv_a_layernorm", RMSNorm(latent_.kv_lora_rank, kLatentNormEps));
  kv_b_proj = register_module(
      "kv_b_proj", Linear(latent_.kv_lora_rank, heads * (latent_.qk_nope_head_dim + latent_.v_head_dim), false));
  o_proj = register_module("o_proj", Linear(heads * latent_.v_head_dim, hidden, false));
}

void LatentAttentionImpl::set_fused_kernels(bool fused) {
  if (q_a_layernorm) q_a_layernorm->set_fused_kernels(fused);
  kv_a_layernorm->set_fused_kernels(fused);
}

void LatentAttentionImpl::describe_init(const std::string& name, double std, double output_std,
                                        InitPlan& plan) const {
  if (q_proj) q_proj->describe_init(name + ".q_proj", std, plan);
  if (q_a_proj) {
    q_a_proj->describe_init(name + ".q_a_proj", std, plan);
    q_a_layernorm->describe_init(name + ".q_a_layernorm", plan);
    q_b_proj->describe_init(name + ".q_b_proj", std, plan);
  }
  kv_a_proj_with_mqa->describe_init(name + ".kv_a_proj_with_mqa", std, plan);
  kv_a_layernorm->describe_init(name + ".kv_a_layernorm", plan);
  kv_b_proj->describe_init(name + ".kv_b_proj", std, plan);
  o_proj->describe_init(name + ".o_proj", output_std, plan);
}

TensorParallelPlan LatentAttentionImpl::tensor_parallel_plan(int64_t rank, int64_t ranks) const {
  TORCH_CHECK(num_heads_ % ranks == 0, num_heads_, " latent attention heads do not split over ", ranks,
              " tensor-parallel ranks");
  const auto heads = split_share(num_heads_, rank, ranks);
  const auto rows = [&](int64_t per_head) { return SplitShare{heads.first * per_head, heads.count * per_head}; };
  TensorParallelPlan plan;
  plan[q_proj ? "q_proj.weight" : "q_b_proj.weight"] = {0, rows(latent_.qk_head_dim())};
  plan["kv_b_proj.weight"] = {0, rows(latent_.qk_nope_head_dim + latent_.v_head_dim)};
  plan["o_proj.weight"] = {1, rows(latent_.v_head_dim)};
  return plan;
}

void LatentAttentionImpl::use_tensor_parallel(std::shared_ptr<TensorParallelOps> ops) {
  // Every rank normalises the whole latent, and only its heads' gradient reaches the gains.
  if (q_a_layernorm) q_a_layernorm->partial_gradient = ops;
  kv_a_layernorm->partial_gradient = ops;
  tensor_parallel_ = std::move(ops);
}

// A projection every tensor-parallel rank holds whole and applies to the whole input, whose
// gradient on each rank comes from its heads only.
torch::Tensor LatentAttentionImpl::replicated(Linear& projection, const torch::Tensor& x) const {
  if (!tensor_parallel_) return projection(x);
  return projection->project_with(x, tensor_parallel_->shared(projection->weight), torch::Tensor());
}

torch::Tensor LatentAttentionImpl::queries(const torch::Tensor& x) {
  if (q_proj) return q_proj(x);
  return q_b_proj(q_a_layernorm(replicated(q_a_proj, x)));
}

std::pair<torch::Tensor, torch::Tensor> LatentAttentionImpl::rotate(const torch::Tensor& q, const torch::Tensor& k,
                                                                    const RotaryTables& rotary,
                                                                    const SequenceLayout& layout) const {
  const int64_t seq = q.size(2);
  const int64_t query_shift = util::numeric_fault().is(util::NumericFaultKind::rope_shift) ? 1 : 0;
  const auto cos = rotary_rows(rotary.cos, layout, seq), sin = rotary_rows(rotary.sin, layout, seq);
  const auto q_in = latent_.rope_interleave ? deinterleave(q) : q;
  const auto k_in = latent_.rope_interleave ? deinterleave(k) : k;
  const auto rotated_q = query_shift == 0 ? apply_rotary(q_in, cos, sin)
                                          : apply_rotary(q_in, rotary_rows(rotary.cos, layout, seq, query_shift),
                                                         rotary_rows(rotary.sin, layout, seq, query_shift));
  return {rotated_q, apply_rotary(k_in, cos, sin)};
}

// The softmax scale is 1/sqrt(qk head dim), times YaRN's mscale^2 where the scaling asks for it.
torch::Tensor LatentAttentionImpl::attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                          const SequenceLayout& layout) const {
  AttentionVariant variant;
  variant.scale = rope_scaling_.softmax_scale(q.size(-1));
  TORCH_CHECK(kernel || !layout.context, "a row split over context-parallel ranks needs a context-parallel kernel");
  return kernel ? kernel(q, k, v, layout, variant) : causal_attention(q, k, v, layout.cu_seqlens, variant);
}

torch::Tensor LatentAttentionImpl::forward(const torch::Tensor& whole, const RotaryTables& rotary,
                                           const SequenceLayout& layout) {
  const auto x = tensor_parallel_ ? tensor_parallel_->enter(whole) : whole;
  const int64_t batch = x.size(0), seq = x.size(1);
  const int64_t nope = latent_.qk_nope_head_dim, rope = latent_.qk_rope_head_dim;
  auto q = queries(x).view({batch, seq, -1, latent_.qk_head_dim()}).transpose(1, 2);
  auto q_parts = q.split({nope, rope}, -1);
  const auto compressed = replicated(kv_a_proj_with_mqa, x).split({latent_.kv_lora_rank, rope}, -1);
  const auto latent = kv_a_layernorm(compressed[0]);
  const auto k_rot_in = compressed[1].view({batch, 1, seq, rope});
  const auto [q_rot, k_rot] = rotate(q_parts[1], k_rot_in, rotary, layout);
  const auto kv = kv_b_proj(latent).view({batch, seq, -1, nope + latent_.v_head_dim}).transpose(1, 2);
  const auto kv_parts = kv.split({nope, latent_.v_head_dim}, -1);
  const int64_t heads = kv.size(1);
  const auto keys = torch::cat({kv_parts[0], k_rot.expand({batch, heads, seq, rope})}, -1);
  const auto queries_rotated = torch::cat({q_parts[0], q_rot}, -1);
  auto attended = attend(queries_rotated, keys, kv_parts[1], layout);
  auto out = o_proj(attended.transpose(1, 2).reshape({batch, seq, -1}));
  return tensor_parallel_ ? tensor_parallel_->leave(out) : out;
}

void LatentAttentionImpl::float8_layers(const std::string& name, Float8Layers& layers) {
  if (q_proj) layers.linears.emplace_back(module_name(name, "q_proj"), q_proj.get());
  if (q_a_proj) {
    layers.linears.emplace_back(module_name(name, "q_a_proj"), q_a_proj.get());
    layers.linears.emplace_back(module_name(name, "q_b_proj"), q_b_proj.get());
  }
  layers.linears.emplace_back(module_name(name, "kv_a_proj_with_mqa"), kv_a_proj_with_mqa.get());
  layers.linears.emplace_back(module_name(name, "kv_b_proj"), kv_b_proj.get());
  layers.linears.emplace_back(module_name(name, "o_proj"), o_proj.get());
}

}  // namespace xtrain::model
