#include "plan/step_time_estimate.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "config/pipeline_layout.h"
#include "layout/loss_chunking.h"
#include "plan/memory_estimate.h"
#include "plan/muon_cost.h"
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

// A GEMM's rate falls as its reduction dimension K shortens: each output tile pays fixed costs
// (its operands' first loads, the epilogue that writes it) that a longer K amortises. DeepGEMM's
// FP8 table (the profile's fp8_gemm_tflops) measures that on these tensor cores. A GEMM in the
// compute dtype runs at fp8 peak / dtype peak (2 for bf16) of FP8's rate, so its main loop over K
// lasts as long as FP8's over that multiple of K, and it reaches table(K x multiple) / the table's
// largest rate of its long-reduction rate (gemm_efficiency and expert_efficiency name that rate).
// 1 without a table, and in fp32 (no tensor cores).
double reduction_factor(const config::Recipe& recipe, const HardwareProfile& hw, double k_dim) {
  const auto& table = hw.fp8_gemm_tflops;
  if (table.k.empty() || recipe.train.dtype == config::Dtype::fp32 || hw.peak_tflops_bf16 <= 0) return 1;
  const double longest = *std::max_element(table.tflops.begin(), table.tflops.end());
  return table.rate(k_dim * hw.peak_tflops_fp8 / hw.peak_tflops_bf16) / longest;
}

// Seconds a ring collective over `ranks` needs for `bytes` per rank's whole buffer
// (all-gather, reduce-scatter: (n - 1) / n of it cross a link; all-reduce twice that).
double ring_seconds(double bytes, int64_t ranks, int64_t stride, const ClusterLayout& layout,
                    const HardwareProfile& hw, double passes = 1) {
  if (ranks <= 1) return 0;
  return passes * bytes * static_cast<double>(ranks - 1) / static_cast<double>(ranks) /
         ring_bandwidth(ranks, stride, layout, hw);
}

// What of `total` seconds of communication the step waits for, where `window` seconds of compute
// could hide it; on a device whose collectives run on its compute cores, all of it.
double exposed(double total, double window, const HardwareProfile& hw) {
  return hw.communication_overlaps_compute ? std::max(0.0, total - window) : total;
}

// How a communication term's note says it overlaps: `behind` where it can, else that it does not.
std::string overlap_note(const HardwareProfile& hw, const std::string& behind) {
  return hw.communication_overlaps_compute ? behind : "on the compute cores, not hidden";
}

// What the communication terms need of the step's shape and its compute.
struct StepShape {
  double micro_batches = 1, micro_tokens = 0, layers = 0, element = 2;
  double dense_s = 0, expert_s = 0, attention_s = 0;
  double compute() const { return dense_s + expert_s + attention_s; }
};

// Seconds that `calls` collectives the step waits on as they are called cost beyond their bytes.
double latency_seconds(double calls, const HardwareProfile& hw) { return calls * hw.collective_latency_ms * 1e-3; }

// The note of a term that pays latency_seconds for `calls` collectives, before its overlap note.
std::string calls_note(double calls, const HardwareProfile& hw) {
  return hw.collective_latency_ms > 0 ? fmt::format("{:.0f} collectives, ", calls) : "";
}

// The collectives a step waits on as they are called, as the engine issues them, per micro batch.
// Tensor parallelism, a layer: all-reduces after the row-parallel attention output and MLP down
// projections forward and before the column-parallel ones backward (4); with sequence parallelism
// an all-gather before and a reduce-scatter after each block forward, the reverse backward, and
// an all-reduce of each norm weight's gradient, which its rank's part of the sequence left
// partial (10); a recomputed forward repeats the forward's (2 or 4). Beside the layers: the
// vocabulary-parallel embedding and head (2; with SP 5, the final norm's gradient among them) and
// the loss, two all-reduces a chunk of its logits, cut as the engine cuts them (one chunk when the
// recipe turns chunking off).
double tensor_parallel_calls(const config::Recipe& recipe, const ClusterLayout& layout, const StepShape& step,
                             int64_t vocab, double recomputed) {
  if (layout.tp <= 1) return 0;
  const bool sp = layout.sequence_parallel;
  const double per_layer = (sp ? 10 : 4) + recomputed * (sp ? 4 : 2);
  const int64_t engine_chunk = layout::loss_chunk_tokens(recipe.memory.chunked_loss, vocab,
                                                         recipe.train.micro_batch_size * recipe.data.seq_len);
  const double chunk_rows = engine_chunk == 0 ? step.micro_tokens : static_cast<double>(engine_chunk);
  const double loss_chunks = std::ceil(step.micro_tokens / std::max(1.0, chunk_rows));
  return (per_layer * step.layers + (sp ? 5 : 2) + 2 * loss_chunks) * step.micro_batches;
}

// Bytes of one micro batch's activations of `width` on a rank.
double micro_tokens_bytes(const StepShape& step, double width) { return step.micro_tokens * width * step.element; }

// FSDP: each unit is gathered for forward and its gradients reduce-scattered, every micro batch
// (fp32, xtrain's) or once a step (the compute dtype gathered, fp32 reduced). xtrain gathers a
// unit again for backward but the embedding (its backward needs the ids alone), the head and the
// last block (kept gathered from their forward to their backward).
double fsdp_seconds(const ModelCensus& c, const StageShare& share, const ClusterLayout& layout,
                    const HardwareProfile& hw, const CommunicationOverlap& overlap, double element,
                    double micro_batches) {
  const double tp = static_cast<double>(layout.tp);
  const double embedding_here = share.pipeline_rank == 0 ? static_cast<double>(c.embedding) / tp : 0;
  double last_dense = 0, last_experts = 0;
  if (share.layers > 0 && !c.layers.empty()) {
    const auto& last = c.layers.back();
    last_dense = static_cast<double>(last.total() - last.experts) / tp;
    last_experts = static_cast<double>(last.experts) / static_cast<double>(layout.tp * layout.ep);
  }
  const auto bytes = [&](double params, double kept_for_backward) {
    if (overlap.fsdp_once_per_step) return (element + 4) * params;
    return 4 * micro_batches * (2 * params + std::max(0.0, params - kept_for_backward));
  };
  return ring_seconds(bytes(share.dense, embedding_here + share.head + last_dense), layout.fsdp * layout.cp, layout.tp,
                      layout, hw) +
         ring_seconds(bytes(share.experts, last_experts), layout.expert_shards(), layout.tp, layout, hw);
}

void add_communication(StepTimeEstimate& e, const ModelCensus& c, const config::Recipe& recipe,
                       const ClusterLayout& layout, const HardwareProfile& hw, const CommunicationOverlap& overlap,
                       const StepShape& step) {
  const auto share = stage_share(c, layout);
  const double compute = step.compute(), micro_batches = step.micro_batches, layers = step.layers;
  const double element = step.element, hidden = static_cast<double>(c.hidden);
  // FSDP's gathers and reductions; prefetch hides them behind the compute but the first unit's.
  const int64_t shards = layout.fsdp * layout.cp;
  const double fsdp_s = fsdp_seconds(c, share, layout, hw, overlap, element, micro_batches);
  // The first unit's gather precedes all compute; the rest runs behind it. Where collectives run
  // on the compute cores nothing is ahead of its use, and each pays the latency: a micro batch
  // gathers every block twice and reduces it, gathers the embedding for its lookup and the head
  // once, and reduces the head (the embedding's gradient reduces once a step): 3 (layers + 1).
  const double fsdp_first = fsdp_s / std::max(1.0, layers);
  const double fsdp_calls =
      fsdp_s > 0 && !hw.communication_overlaps_compute && !overlap.fsdp_once_per_step ? 3 * (layers + 1) * micro_batches
                                                                                       : 0;
  if (fsdp_s > 0)
    e.terms.push_back({"FSDP gathers and reductions",
                       fsdp_first + exposed(fsdp_s - fsdp_first, compute, hw) + latency_seconds(fsdp_calls, hw),
                       calls_note(fsdp_calls, hw) +
                           fmt::format("{:.3g} s in all, {}", fsdp_s, overlap_note(hw, "prefetched"))});
  // Data parallelism: the replicas' gradients, once a step, behind the last micro batch's
  // backward (two thirds of its compute) as their buckets fill; a distributed optimizer also
  // hides the parameters' all-gather behind the next step's first forward.
  const double shard_parameters = share.dense / static_cast<double>(shards) +
                                  share.experts / static_cast<double>(layout.expert_shards());
  const int64_t dp_stride = layout.tp * layout.cp * layout.fsdp;
  const double micro_compute = compute / micro_batches;
  const double dp_s = overlap.distributed_optimizer
                          ? ring_seconds((4 + element) * shard_parameters, layout.dp, dp_stride, layout, hw)
                          : ring_seconds(4 * shard_parameters, layout.dp, dp_stride, layout, hw, 2);
  const double dp_window = overlap.distributed_optimizer ? micro_compute : micro_compute * 2 / 3;
  // One reduction a unit (the blocks, the embedding, the head), paying the latency where nothing
  // overlaps.
  const double dp_calls = dp_s > 0 && !hw.communication_overlaps_compute ? layers + 2 : 0;
  if (dp_s > 0)
    e.terms.push_back({"data-parallel gradients", exposed(dp_s, dp_window, hw) + latency_seconds(dp_calls, hw),
                       calls_note(dp_calls, hw) + fmt::format("{:.3g} s in all, {}", dp_s,
                                   overlap_note(hw, overlap.distributed_optimizer
                                                        ? "behind the last backward and the first forward"
                                                        : "behind the last backward"))});
  // TP: two all-reduces (or all-gather + reduce-scatter pairs) a layer forward, two backward, and
  // the forward's two again where full recompute runs it twice.
  const double recomputed = recipe.memory.recompute == memory::Recompute::full ? recipe.memory.recompute_ratio : 0;
  const double tp_calls = tensor_parallel_calls(recipe, layout, step, c.vocab, recomputed);
  const double tp_s = ring_seconds(micro_tokens_bytes(step, hidden), layout.tp, 1, layout, hw, 2) *
                          (4 + 2 * recomputed) * layers * micro_batches +
                      latency_seconds(tp_calls, hw);
  if (tp_s > 0)
    e.terms.push_back({"tensor-parallel collectives", overlap.tp_behind_gemms ? exposed(tp_s, step.dense_s, hw) : tp_s,
                       calls_note(tp_calls, hw) +
                           (overlap.tp_behind_gemms
                                ? fmt::format("{:.3g} s in all, {}", tp_s, overlap_note(hw, "behind the GEMMs"))
                                : "exposed")});
  // Ring attention passes every other rank's keys and values forward, and them and their
  // gradients backward, behind the attention.
  const double tp = static_cast<double>(layout.tp), cp = static_cast<double>(layout.cp);
  const double kv_bytes = step.micro_tokens * static_cast<double>(2 * c.key_width) / tp * element;
  // Its passes: cp - 1 forward (and again where full recompute reruns it); backward cp - 1 of the
  // blocks and cp of their gradients' accumulators, the last one home.
  const double cp_calls = layout.cp > 1 ? ((cp - 1) * (2 + recomputed) + cp) * layers * micro_batches : 0;
  const double cp_s = layout.cp > 1 ? 3 * kv_bytes * (cp - 1) / ring_bandwidth(layout.cp, layout.tp, layout, hw) *
                                              layers * micro_batches +
                                          latency_seconds(cp_calls, hw)
                                    : 0;
  if (cp_s > 0)
    e.terms.push_back({"context-parallel ring", exposed(cp_s, step.attention_s, hw),
                       calls_note(cp_calls, hw) +
                           fmt::format("{:.3g} s in all, {}", cp_s, overlap_note(hw, "behind the attention"))});
  // Experts: dispatch and combine forward and backward.
  // Each Domino part of a micro batch exchanges its token counts, dispatches and combines forward
  // (again where full recompute reruns it) and sends both gradients back.
  const double a2a_bytes = step.micro_tokens * static_cast<double>(c.top_k) * hidden * element;
  const double parts = static_cast<double>(std::max<int64_t>(1, recipe.parallel.intra_layer_micro_batch));
  const double ep_calls = layout.ep > 1 ? (3 * (1 + recomputed) + 2) * parts *
                                              static_cast<double>(share.moe_layers) * micro_batches
                                        : 0;
  const double ep_s = ring_seconds(a2a_bytes, layout.ep, layout.tp * layout.cp, layout, hw, 4) *
                          static_cast<double>(share.moe_layers) * micro_batches +
                      latency_seconds(ep_calls, hw);
  const bool domino = parts > 1;
  if (ep_s > 0)
    e.terms.push_back({"expert all-to-all", domino ? exposed(ep_s, step.expert_s, hw) : ep_s,
                       calls_note(ep_calls, hw) +
                           (domino ? overlap_note(hw, "behind the experts (Domino-EP)") : "exposed")});
  // The ranks that hold quieter experts wait in the all-to-all for the busiest; no overlap hides
  // it, as it is compute on the step's longest path.
  const double busiest = expert_rank_load(c.expert_load_ratio, c.experts, layout.ep);
  if (busiest > 1)
    e.terms.push_back({"expert load imbalance", (busiest - 1) * step.expert_s,
                       fmt::format("the busiest expert {:.2f}x the mean, its rank's {:.0f} experts {:.2f}x a rank's "
                                   "mean tokens",
                                   c.expert_load_ratio, static_cast<double>(c.experts / layout.ep), busiest)});
}

void add_pipeline(StepTimeEstimate& e, const ModelCensus& c, const config::Recipe& recipe, const ClusterLayout& layout,
                  const HardwareProfile& hw, const StepShape& step) {
  if (layout.pp <= 1) return;
  const auto schedule = recipe.parallel.pp_schedule;
  const double v = schedule == config::PpSchedule::interleaved_1f1b || config::v_shaped(schedule)
                       ? static_cast<double>(layout.virtual_stages)
                       : 1;
  // Each of a rank's v chunks sends a micro batch's activations forward and receives their
  // gradients back, point to point (one NIC across nodes); sequence parallelism sends each rank's
  // 1/tp of the sequence.
  const double width = static_cast<double>(c.hidden) / (layout.sequence_parallel ? static_cast<double>(layout.tp) : 1);
  const double send_calls = 2 * v * step.micro_batches;
  const double sends = 2 * v * micro_tokens_bytes(step, width) * step.micro_batches /
                           ring_bandwidth(2, layout.world() / layout.pp, layout, hw) +
                       latency_seconds(send_calls, hw);
  e.terms.push_back({"pipeline sends", sends, calls_note(send_calls, hw) + "activations forward, gradients backward"});
  // 1F1B runs the fullest stage's micro batches back to back; the step waits besides for the
  // first micro batch to reach it and the last to drain from it through the other stages: their
  // compute for one micro batch, (pp - 1) x the fullest's when the stages are even (Megatron's
  // (pp - 1) / (m v)), less where the fullest stage is the slowest by far; interleaving divides it by v.
  const auto share = stage_share(c, layout);
  const double others = step.dense_s * std::max(0.0, share.all_token_matrices / share.token_matrices - 1) +
                        step.expert_s * std::max(0.0, share.all_token_matrices / share.token_matrices - 1) +
                        step.attention_s * std::max(0.0, static_cast<double>(share.all_layers) /
                                                              static_cast<double>(std::max<int64_t>(1, share.layers)) - 1);
  // zb_h1 fills the bubble with the deferred weight gradients (W): (pp - 1)(F + B - W) of it
  // where 1f1b leaves (pp - 1)(F + B + W), W being a third of the dense GEMMs' forward and
  // backward (attention has no weights); zbv's V leaves (pp - 1)(F + B - 2W) of its half-size
  // chunks (Qi et al., section 6), the halving counted by v = 2. dualpipev leaves (pp - 1)(F&B + B
  // - 3W) (DeepSeek's DualPipe table, its PP / 2 - 1 for pp ranks), F&B the overlapped pair, which
  // one stream runs as F + B + W: with B taken as F, 3/2 - 7/6 of the dense share of a chunk's
  // F + B + W, more than zbv's, since the pair's overlap is what it gains.
  const double compute = step.dense_s + step.expert_s + step.attention_s;
  const bool zero_bubble = config::splits_backward(schedule);
  const double dense_share = compute > 0 ? step.dense_s / compute : 0;
  const double weights = schedule == config::PpSchedule::zbv ? 2 : 1;
  const double filled = schedule == config::PpSchedule::dualpipev ? std::max(0.0, 1.5 - 7.0 / 6.0 * dense_share)
                        : zero_bubble                             ? std::max(0.0, 1 - (weights + 1) / 3.0 * dense_share)
                                                                  : 1;
  e.terms.push_back({"pipeline bubble", others / (step.micro_batches * v) * filled,
                     fmt::format("{} stages, {:.0f} micro batches{}{}", layout.pp, step.micro_batches,
                                 v > 1 ? fmt::format(", {:.0f} virtual stages", v) : "",
                                 zero_bubble ? fmt::format(", weight gradients in the bubble ({})", to_string(schedule))
                                             : "")});
}

// The rate of the linear layers' FP8 GEMMs: where the engine's FP8 linear layers have a published
// speedup over its compute dtype's (torchao's Float8Linear, its casts included), that multiple of
// `dense_rate` for the size of the block's largest GEMM (M: a micro batch's tokens, K: the hidden
// size, N: the MLP's width on the rank); else `fp8_rate`, the profile's FP8 GEMM rate.
double fp8_linear_rate(const ModelCensus& c, const HardwareProfile& hw, double dense_rate, double fp8_rate,
                       double micro_tokens, double tp) {
  const auto* table = hw.fp8_linear_table();
  if (table == nullptr) return fp8_rate;
  const double mlp = static_cast<double>(std::max(c.intermediate, c.moe_intermediate)) / tp;
  return dense_rate * table->at(std::cbrt(micro_tokens * static_cast<double>(c.hidden) * mlp));
}

struct AttentionTime {
  double seconds = 0;
  std::string detail;
};

// FlashAttention's backward runs 2.5x the forward's FLOPs (its five matrix products, the scores
// recomputed) at this fraction of the forward's rate: FlashAttention-2 on H100, head dim 128,
// 370 TFLOP/s forward and 335 forward and backward (arXiv:2307.08691).
constexpr double kAttentionBackwardFlops = 2.5, kAttentionBackwardRate = 0.87;

// The score and value products of this rank's tokens, a query against the keys it sees (half the
// sequence under the causal mask; a sliding window fewer), forward and backward (and a recomputed
// forward). With a published kernel table: at the kernel's rate for the head dimension and the
// sequence length; else at attention_efficiency of the dtype's peak, the forward's FLOPs thrice.
AttentionTime attention_seconds(const ModelCensus& c, const config::Recipe& recipe, const HardwareProfile& hw,
                                double rank_tokens, double layers, double tp, double cp, bool recomputed,
                                double dtype_peak) {
  const double seq = static_cast<double>(recipe.data.seq_len);
  const int64_t model_layers = std::max<int64_t>(1, static_cast<int64_t>(c.layers.size()));
  double keys = 0;  // keys a query sees, the mean over the model's layers
  for (int64_t layer = 0; layer < model_layers; ++layer) {
    const double window = static_cast<double>(recipe.model.window_of(layer));
    keys += window > 0 && window < seq ? window - window * window / (2 * seq) : seq / 2;
  }
  keys /= static_cast<double>(model_layers);
  const double forward = rank_tokens * layers * 2 * keys * static_cast<double>(c.query_width + c.value_width) / tp;
  const double forwards = recomputed ? 2 : 1;
  const auto* table = hw.attention_table();
  if (table == nullptr)
    return {forward * (2 + forwards) / (dtype_peak * hw.attention_efficiency),
            fmt::format("causal, {:.0f} tokens a sequence, {:.3g} forward FLOPs at {:.0f}% of peak", seq, forward,
                        100 * hw.attention_efficiency)};
  const double head_dim = static_cast<double>(c.query_width) / static_cast<double>(std::max<int64_t>(1, c.heads));
  // Under ring context parallelism each kernel call sees one block of seq / cp keys (its own, then
  // each neighbour's), so the kernel runs at the table's rate for that length.
  // Ulysses exchanges heads instead and runs whole sequences.
  const double call_keys = recipe.parallel.cp_kind == parallel::ContextKind::ring ? seq / std::max(1.0, cp) : seq;
  const double rate = table->rate(head_dim, call_keys) * 1e12;
  return {forward * forwards / rate + kAttentionBackwardFlops * forward / (rate * kAttentionBackwardRate),
          fmt::format("causal, {:.0f} tokens a sequence{}, head dim {:.0f}: {:.3g} forward FLOPs at {} {:.0f} TFLOP/s",
                      seq, cp > 1 ? fmt::format(" in ring blocks of {:.0f}", call_keys) : "", head_dim, forward,
                      hw.attention_kernel, rate / 1e12)};
}

}  // namespace

double expert_rank_load(double load_ratio, int64_t experts, int64_t ep) {
  if (ep <= 1 || experts <= 1 || load_ratio <= 1) return 1;
  const double e = static_cast<double>(experts), a_rank = e / static_cast<double>(ep);
  const double busiest = std::min(load_ratio, e);  // it cannot take more than every token's choice
  const double others = (e - busiest) / (e - 1);   // each other expert, in units of the mean
  return (busiest + (a_rank - 1) * others) / a_rank;
}

// The bandwidth (bytes/s) one rank of a group of `ranks`, `stride` apart in rank order, reaches
// in a ring: NVLink inside a node; across nodes, the group's ranks in one node each drive their own
// NIC (one a device, rail-aligned), so a ring with k ranks a node moves k NICs' worth between
// nodes, and NVLink carries it inside: min(NVLink, k x NIC).
double ring_bandwidth(int64_t ranks, int64_t stride, const ClusterLayout& layout, const HardwareProfile& hw) {
  if (layout.inside_node(ranks, stride)) return hw.intra_node_gbs * hw.link_efficiency * 1e9;
  const int64_t per_node = std::clamp<int64_t>(layout.gpus_per_node / std::max<int64_t>(1, stride), 1, ranks);
  return std::min(hw.intra_node_gbs, static_cast<double>(per_node) * hw.inter_node_gbs) * hw.link_efficiency * 1e9;
}

double StepTimeEstimate::seconds() const {
  double sum = 0;
  for (const auto& term : terms) sum += term.seconds;
  return sum;
}

StepTimeEstimate estimate_step_time(const ModelCensus& c, const config::Recipe& recipe, const ClusterLayout& layout,
                                    const HardwareProfile& hw, const CommunicationOverlap& overlap) {
  const auto share = stage_share(c, layout);
  const auto& t = recipe.train;
  const auto& m = recipe.memory;
  const double element = element_bytes(recipe);
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
  // FP8 runs the linear layers' and experts' GEMMs at the fp8 rate and its own efficiency; the
  // output head and attention stay in the compute dtype, and so does the weight gradient (2 of
  // the 6 passes) under rowwise_with_gw_hp.
  const bool fp8 = recipe.precision.fp8 != model::Float8Scaling::off && hw.peak_tflops_fp8 > 0;
  const double high_passes = fp8 && recipe.precision.fp8 == model::Float8Scaling::rowwise_with_gw_hp ? 2 : 0;
  const double dtype_peak = (t.dtype == config::Dtype::fp32 ? hw.peak_tflops_fp32 : hw.peak_tflops_bf16) * 1e12;
  // What the fitted GEMM efficiencies are fractions of: the published maximum achievable matmul
  // rate where the profile gives it, else the peak.
  const double gemm_base = hw.gemm_base_tflops(t.dtype == config::Dtype::fp32) * 1e12;
  const double hidden = static_cast<double>(c.hidden);
  // FP8 GEMMs at the published rate for their reduction dimension (the hidden size) where the
  // profile has the table, else at its fraction of the fp8 peak.
  const double fp8_rate = hw.fp8_gemm_tflops.k.empty() ? hw.peak_tflops_fp8 * 1e12 * hw.fp8_efficiency()
                                                       : hw.fp8_gemm_tflops.rate(hidden) * 1e12;
  // The compute dtype's GEMMs at their rate for K = the hidden size (reduction_factor).
  const double dense_rate = gemm_base * hw.gemm_efficiency * reduction_factor(recipe, hw, hidden);
  const bool linear_speedup = fp8 && hw.fp8_linear_table() != nullptr;  // its casts inside the speedup
  const double linear_fp8_rate = fp8_linear_rate(c, hw, dense_rate, fp8_rate, micro_tokens, tp);
  // Seconds a matrix parameter a token takes over its passes: `low_rate` for those FP8 runs,
  // `dtype_rate` for the rest.
  auto per_parameter = [&](double dtype_rate, double low_rate, double passes) {
    return fp8 ? (passes - high_passes) / low_rate + high_passes / dtype_rate : passes / dtype_rate;
  };
  // torchtitan's per-op selective recompute reruns a block's even matrix products (wk, wo, w3 of a
  // llama block) in backward: 2 more passes for that share of a dense block's matrices.
  const bool op_recompute = overlap.selective_every_second_matmul && m.recompute == memory::Recompute::selective;
  double op_recomputed = 0;
  if (op_recompute && !c.layers.empty() && c.layers.front().matrices() > 0)
    op_recomputed = hidden *
                    static_cast<double>(c.key_width + c.value_width + std::max(c.intermediate, c.moe_intermediate)) /
                    static_cast<double>(c.layers.front().attention + c.layers.front().dense);
  const double layer_passes = gemm_passes + 2 * op_recomputed;
  const double dense_s = rank_tokens * ((dense_matrices - share.head) * per_parameter(dense_rate, linear_fp8_rate, layer_passes) +
                                        share.head * gemm_passes / dense_rate);
  // Experts' grouped GEMMs lose rate as their tokens an expert fall: t / (t + half) of the large
  // shapes' (the profile's grouped_gemm_half_tokens, from a published grouped GEMM table); under
  // FP8 at the published FP8 rate so reduced (that table is FP8's), else at expert_efficiency.
  const double tokens_per_expert = c.experts > 0 ? micro_tokens * static_cast<double>(c.top_k * layout.ep) /
                                                       static_cast<double>(c.experts)
                                                 : 0;
  const double grouped = hw.grouped_gemm_half_tokens > 0 && tokens_per_expert > 0
                             ? tokens_per_expert / (tokens_per_expert + hw.grouped_gemm_half_tokens)
                             : 1;
  const double expert_s = rank_tokens * share.expert_matrices *
                          per_parameter(gemm_base * hw.expert_efficiency * grouped,
                                        fp8_rate * grouped, gemm_passes);
  // Selective and full recompute rerun attention's forward; torchtitan's per-op policy saves its output.
  const bool recompute_attention = m.recompute != memory::Recompute::none && !op_recompute;
  const auto attention = attention_seconds(c, recipe, hw, rank_tokens, layers, tp, cp, recompute_attention, dtype_peak);
  e.terms.push_back({"GEMMs (dense)", dense_s,
                     fmt::format("{:.3g} matrix parameters a token here{}", dense_matrices,
                                 op_recompute ? fmt::format(", {:.0f}% of the blocks' rerun (every second product)",
                                                            100 * op_recomputed)
                                              : "")});
  if (share.expert_matrices > 0)
    e.terms.push_back({"GEMMs (experts)", expert_s,
                       fmt::format("{:.3g} active expert parameters a token here, {:.0f} tokens an expert", share.expert_matrices,
                                   tokens_per_expert)});
  const double attention_s = attention.seconds;
  e.terms.push_back({"attention", attention_s, attention.detail});
  if (fp8 && !linear_speedup) {
    // Each linear layer's input and output gradient are scaled and cast to fp8 (an amax read, a
    // read and a write, and the transposed copy the weight gradient needs: 6 bytes an element) and
    // so is each weight, gathered, once a micro batch; memory bound.
    const double inner = static_cast<double>(std::max(c.intermediate, c.moe_intermediate * c.top_k));
    const double cast_bytes = 6 * (rank_tokens * layers * (9 * hidden + 3 * inner) / tp +
                                   micro_batches * (share.token_matrices - share.head));
    e.terms.push_back({"FP8 scaling and casts", cast_bytes / (hw.memory_gbs * 1e9),
                       "each linear layer's input, output gradient and weight, 6 B an element"});
  }
  const double elementwise_bytes =
      rank_tokens * layers * element *
      (kElementwiseHidden * hidden / (layout.sequence_parallel ? tp : 1) +
       kElementwiseIntermediate * static_cast<double>(std::max(c.intermediate, c.moe_intermediate * c.top_k)) / tp);
  e.terms.push_back({"elementwise", elementwise_bytes / (hw.memory_gbs * 1e9), "norms, rotary, activations, residuals"});
  const double shard_parameters = share.dense / static_cast<double>(layout.fsdp * layout.cp) +
                                  share.experts / static_cast<double>(layout.expert_shards());
  // A distributed optimizer updates only the replica's 1/dp of the shard.
  const double updated = shard_parameters / (overlap.distributed_optimizer ? static_cast<double>(layout.dp) : 1);
  e.terms.push_back({"optimizer", updated * kAdamBytes / (hw.memory_gbs * 1e9), "AdamW over this rank's shard"});
  if (recipe.optim.name == config::Optimizer::muon) {
    const auto muon = muon_cost(c, recipe, layout, hw, layers);
    e.terms.push_back({"Muon Newton-Schulz", muon.compute_s,
                       fmt::format("{:.3g} FLOPs, every whole matrix here, in {}", muon.flops,
                                   config::to_string(recipe.optim.muon.ns_dtype))});
    if (muon.collectives > 0)
      e.terms.push_back({"Muon assembly", muon.communication_s,
                         fmt::format("{:.3g} MB sent in {:.0f} fp32 all-reduces, not hidden", muon.sent_bytes / 1e6,
                                     muon.collectives)});
  }

  StepShape step;
  step.micro_batches = micro_batches;
  step.micro_tokens = micro_tokens;
  step.layers = layers;
  step.element = element;
  step.dense_s = dense_s;
  step.expert_s = expert_s;
  step.attention_s = attention_s;
  add_communication(e, c, recipe, layout, hw, overlap, step);
  add_pipeline(e, c, recipe, layout, hw, step);
  return e;
}

}  // namespace xtrain::plan
