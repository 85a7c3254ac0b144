#include "plan/step_time_estimate.h"

#include <algorithm>

#include <fmt/format.h>

#include "plan/memory_estimate.h"
#include "plan/stage_share.h"

namespace xtrain::plan {
namespace {

// Bytes per token per layer that the elementwise ops (norms, rotary, SwiGLU, residual adds)
// read and write in forward and backward, in units of the hidden and intermediate widths.
constexpr double kElementwiseHidden = 24, kElementwiseIntermediate = 8;
constexpr double kAdamBytes = 28;  // AdamW reads weight, gradient, two moments and writes three

double peak_tflops(const config::Recipe& recipe, const HardwareProfile& hw) {
  if (recipe.precision.fp8 != model::Float8Scaling::off && hw.peak_tflops_fp8 > 0) return hw.peak_tflops_fp8;
  return recipe.train.dtype == config::Dtype::fp32 ? hw.peak_tflops_fp32 : hw.peak_tflops_bf16;
}

// Seconds a ring collective over `ranks` needs for `bytes` per rank's whole buffer
// (all-gather, reduce-scatter: (n - 1) / n of it cross a link; all-reduce twice that).
double ring_seconds(double bytes, int64_t ranks, bool inside_node, const HardwareProfile& hw, double passes = 1) {
  if (ranks <= 1) return 0;
  const double gbs = (inside_node ? hw.intra_node_gbs : hw.inter_node_gbs) * hw.link_efficiency;
  return passes * bytes * static_cast<double>(ranks - 1) / static_cast<double>(ranks) / (gbs * 1e9);
}

}  // namespace

double StepTimeEstimate::seconds() const {
  double sum = 0;
  for (const auto& term : terms) sum += term.seconds;
  return sum;
}

StepTimeEstimate estimate_step_time(const ModelCensus& c, const config::Recipe& recipe, const ClusterLayout& layout,
                                    const HardwareProfile& hw) {
  const auto share = stage_share(c, layout);
  const auto& t = recipe.train;
  const auto& m = recipe.memory;
  const double element = activation_bytes(recipe);
  const double peak = peak_tflops(recipe, hw) * 1e12;
  const double seq = static_cast<double>(recipe.data.seq_len);
  const double tp = static_cast<double>(layout.tp), cp = static_cast<double>(layout.cp);
  const double rank_tokens = static_cast<double>(t.global_batch_size) * seq / static_cast<double>(layout.data_ranks()) / cp;
  const double micro_batches = std::max<double>(
      1, static_cast<double>(t.global_batch_size) / static_cast<double>(layout.data_ranks() * t.micro_batch_size));
  const double micro_tokens = rank_tokens / micro_batches;
  const double layers = static_cast<double>(share.layers);
  const double full_recompute = m.recompute == memory::Recompute::full ? m.recompute_ratio : 0;

  StepTimeEstimate e;
  e.world = layout.world();
  e.peak_flops = peak;
  e.tokens_per_step = static_cast<double>(t.global_batch_size) * seq;
  // Model FLOPs: 6 a matrix parameter a token, and the full attention square (Megatron's count).
  const double attention_width = static_cast<double>(c.query_width + c.value_width) / tp;
  const double attention_model = 3 * 2 * seq * attention_width * layers;  // per token, fwd + bwd
  e.model_flops = rank_tokens * (6 * share.token_matrices + attention_model);

  const double dense_matrices = share.token_matrices - share.expert_matrices;
  const double gemm_passes = 6 + 2 * full_recompute;  // a recomputed layer runs its forward twice
  const double dense_s = rank_tokens * gemm_passes * dense_matrices / (peak * hw.gemm_efficiency);
  const double expert_s = rank_tokens * gemm_passes * share.expert_matrices / (peak * hw.expert_efficiency);
  const bool recompute_attention = m.recompute != memory::Recompute::none;
  const double attention_s = rank_tokens * attention_model / 2 * (recompute_attention ? 4.0 / 3 : 1) /
                             (peak * hw.attention_efficiency);  // causal: half the square
  e.terms.push_back({"GEMMs (dense)", dense_s, fmt::format("{:.3g} matrix parameters a token here", dense_matrices)});
  if (share.expert_matrices > 0)
    e.terms.push_back({"GEMMs (experts)", expert_s, fmt::format("{:.3g} active expert parameters a token here", share.expert_matrices)});
  e.terms.push_back({"attention", attention_s, fmt::format("causal, {:.0f} tokens a sequence", seq)});
  const double elementwise_bytes =
      rank_tokens * layers * element *
      (kElementwiseHidden * static_cast<double>(c.hidden) / (layout.sequence_parallel ? tp : 1) +
       kElementwiseIntermediate * static_cast<double>(std::max(c.intermediate, c.moe_intermediate * c.top_k)) / tp);
  e.terms.push_back({"elementwise", elementwise_bytes / (hw.memory_gbs * 1e9), "norms, rotary, activations, residuals"});
  const double shard_parameters = share.dense / static_cast<double>(layout.fsdp * layout.cp) +
                                  share.experts / static_cast<double>(layout.expert_shards());
  e.terms.push_back({"optimizer", shard_parameters * kAdamBytes / (hw.memory_gbs * 1e9), "AdamW over this rank's shard"});
  const double compute = dense_s + expert_s + attention_s;

  // FSDP: every micro batch gathers each unit for forward and again for backward, and
  // reduce-scatters its gradients; prefetch hides them behind the compute except the first.
  const int64_t shards = layout.fsdp * layout.cp;
  const double fsdp_bytes = 4 * share.dense * 3 * micro_batches;
  const double expert_bytes = 4 * share.experts * 3 * micro_batches;
  const double fsdp_s = ring_seconds(fsdp_bytes, shards, layout.inside_node(shards, layout.tp), hw) +
                        ring_seconds(expert_bytes, layout.expert_shards(), layout.inside_node(layout.expert_shards(), layout.tp), hw);
  const double fsdp_exposed = fsdp_s > 0 ? std::max(0.0, fsdp_s - compute) + fsdp_s / std::max(1.0, layers) : 0;
  if (fsdp_s > 0)
    e.terms.push_back({"FSDP gathers and reductions", fsdp_exposed, fmt::format("{:.3g} s in all, prefetched", fsdp_s)});
  const double dp_s = ring_seconds(4 * shard_parameters, layout.dp, layout.dp_inside(), hw, 2);
  if (dp_s > 0)
    e.terms.push_back({"data-parallel all-reduce", std::max(0.0, dp_s - compute / micro_batches / 2),
                       fmt::format("{:.3g} s in all, behind the last backward", dp_s)});
  // TP: two all-reduces (or all-gather + reduce-scatter pairs) a layer forward, two backward.
  const double tp_s = ring_seconds(4 * micro_tokens * static_cast<double>(c.hidden) * element, layout.tp,
                                   layout.tp_inside(), hw, 2) * layers * micro_batches;
  if (tp_s > 0) e.terms.push_back({"tensor-parallel collectives", tp_s, "exposed"});
  // Ring attention passes every other rank's keys and values forward, and them and their
  // gradients backward, behind the attention.
  const double kv_bytes = micro_tokens * static_cast<double>(2 * c.key_width) / tp * element;
  const double cp_s = layout.cp > 1 ? 3 * kv_bytes * (cp - 1) / ((layout.cp_inside() ? hw.intra_node_gbs : hw.inter_node_gbs) *
                                                                 hw.link_efficiency * 1e9) * layers * micro_batches
                                    : 0;
  if (cp_s > 0) e.terms.push_back({"context-parallel ring", std::max(0.0, cp_s - attention_s), fmt::format("{:.3g} s in all", cp_s)});
  // Experts: dispatch and combine forward and backward.
  const double a2a_bytes = micro_tokens * static_cast<double>(c.top_k * c.hidden) * element;
  const double ep_s = ring_seconds(a2a_bytes, layout.ep, layout.ep_inside(), hw, 4) *
                      static_cast<double>(share.moe_layers) * micro_batches;
  if (ep_s > 0)
    e.terms.push_back({"expert all-to-all", recipe.parallel.intra_layer_micro_batch > 1 ? std::max(0.0, ep_s - expert_s) : ep_s,
                       recipe.parallel.intra_layer_micro_batch > 1 ? "behind the experts (Domino-EP)" : "exposed"});
  if (layout.pp > 1) {
    const double sends = 2 * micro_tokens * static_cast<double>(c.hidden) * element * micro_batches /
                         ((layout.inside_node(layout.pp, layout.world() / layout.pp) ? hw.intra_node_gbs : hw.inter_node_gbs) *
                          hw.link_efficiency * 1e9);
    const double v = recipe.parallel.pp_schedule == config::PpSchedule::interleaved_1f1b
                         ? static_cast<double>(layout.virtual_stages)
                         : 1;
    e.terms.push_back({"pipeline sends", sends, "activations forward, gradients backward"});
    e.terms.push_back({"pipeline bubble", compute * static_cast<double>(layout.pp - 1) / (micro_batches * v),
                       fmt::format("{} stages, {:.0f} micro batches{}", layout.pp, micro_batches,
                                   v > 1 ? fmt::format(", {:.0f} virtual stages", v) : "")});
  }
  return e;
}

}  // namespace xtrain::plan
