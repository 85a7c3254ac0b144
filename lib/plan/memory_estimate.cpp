#include "plan/memory_estimate.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include <fmt/format.h>

#include "config/pipeline_layout.h"
#include "layout/activation_memory.h"
#include "layout/loss_chunking.h"
#include "plan/stage_share.h"

namespace xtrain::plan {
namespace {

constexpr double kStateBytes = 16;  // fp32 weight, gradient, and AdamW's two moments

// A layer's widths as layout/activation_memory.h counts them.
layout::LayerWidths layer_widths(const ModelCensus& c, const LayerCensus& layer) {
  layout::LayerWidths w;
  w.hidden = c.hidden;
  w.query_width = c.query_width;
  w.key_width = c.key_width;
  w.value_width = c.value_width;
  w.intermediate = c.intermediate;
  w.routed = layer.experts > 0;
  w.experts = c.experts;
  w.top_k = c.top_k;
  w.moe_intermediate = c.moe_intermediate;
  w.shared_experts = c.shared_experts;
  return w;
}

layout::ActivationSplit activation_split(const ClusterLayout& layout) {
  return {layout.tp, layout.sequence_parallel, layout.cp};
}

}  // namespace

double MemoryEstimate::total() const {
  double sum = 0;
  for (const auto& term : terms) sum += term.bytes;
  return sum;
}

const MemoryTerm& MemoryEstimate::largest() const {
  return *std::max_element(terms.begin(), terms.end(),
                           [](const MemoryTerm& a, const MemoryTerm& b) { return a.bytes < b.bytes; });
}

double element_bytes(const config::Recipe& recipe) {
  return static_cast<double>(layout::activation_bytes(recipe.train.dtype == config::Dtype::fp32));
}

namespace {

// Activations a pipeline rank holds at its fullest: what a micro batch keeps for backward in each
// of its chunks (recompute keeps only the input of its first share of the rank's layers, and one
// layer's whole set while it reruns), held from a chunk's forward to its backward in the order the
// rank's schedule runs them (config/pipeline_layout.h).
struct HeldActivations {
  double bytes = 0;       // the peak
  double rerun = 0;       // a rerun layer's whole set and its MLP's gradients (recompute), beside the peak
  double in_flight = 0;   // the peak in micro batches of the rank's whole share
};

HeldActivations held_activations(const ModelCensus& c, const config::Recipe& recipe, const ClusterLayout& layout,
                                 const StageShare& share, double element, double tokens, double micro_batches,
                                 const CommunicationOverlap& engine) {
  const auto& m = recipe.memory;
  // torchtitan's per-op selective recompute (its _save_list, every second mm rerun) keeps of a
  // block its input and the outputs of wq, wv, attention, w1 and w2, and reruns the rest in
  // backward, one block at a time as full recompute does.
  const bool op_recompute = engine.selective_every_second_matmul && m.recompute == memory::Recompute::selective;
  const double recompute = m.recompute == memory::Recompute::full ? m.recompute_ratio : op_recompute ? 1 : 0;
  std::vector<double> chunk_kept;
  double widest = 0;
  int64_t ordinal = 0;
  const auto split = activation_split(layout);
  const double input = tokens * layout::block_input_bytes(c.hidden, split, element);
  for (const auto& [first, last] : share.chunk_layers) {
    double kept = 0;
    for (int64_t i = first; i < last; ++i, ++ordinal) {
      const auto bytes = layout::layer_activation_bytes(layer_widths(c, c.layers[static_cast<size_t>(i)]), split, element);
      const double full = bytes.set * tokens;
      widest = std::max(widest, (bytes.set + bytes.mlp) * tokens);
      const bool recomputes = static_cast<double>(ordinal) < recompute * static_cast<double>(share.layers);
      const double op_saved =
          2 * input + tokens * element *
                          static_cast<double>(c.query_width + c.key_width + c.value_width + c.intermediate) /
                          static_cast<double>(layout.tp * layout.cp);
      kept += recomputes ? (m.offload_activations ? 0 : op_recompute ? op_saved : input) : full;
    }
    chunk_kept.push_back(kept);
  }
  const double one_micro_batch = std::accumulate(chunk_kept.begin(), chunk_kept.end(), 0.0);
  double held = one_micro_batch;
  if (layout.pp > 1) {
    double live = 0;
    held = 0;
    for (const auto& action : config::pipeline_actions(recipe.parallel.pp_schedule, layout.pp, layout.virtual_stages,
                                                       share.pipeline_rank,
                                                       static_cast<int64_t>(std::ceil(micro_batches)))) {
      // A split backward's activations go with its W (the weight gradients read them).
      if (action.forward || action.releases())
        live += (action.forward ? 1 : -1) * chunk_kept[static_cast<size_t>(action.chunk)];
      held = std::max(held, live);
    }
  }
  return {held, recompute > 0 ? widest : 0, one_micro_batch > 0 ? held / one_micro_batch : 0};
}

// The transient terms at one moment of the step.
struct Moment {
  double gathered = 0, activations = 0, logits = 0, expert_sums = 0;
  double total() const { return gathered + activations + logits + expert_sums; }
};

// The loss's memory beside the head's gradient (layout::loss_bytes), its chunk cut as the engine
// cuts it (layout::loss_chunk_tokens), at most this rank's tokens. Tensor parallelism always
// chunks (one chunk when the recipe says off).
double loss_bytes(const ModelCensus& c, const config::Recipe& recipe, const ClusterLayout& layout, double tokens,
                  double element, const CommunicationOverlap& engine) {
  const auto& spec = recipe.memory.chunked_loss;
  if (spec == "off" && layout.tp == 1) return layout::loss_bytes(tokens, 0, c.vocab, c.hidden, layout.tp, element);
  // torch's loss_parallel backward, (zeros + exp(log_probs)) * grad: the saved log-probabilities,
  // the zeros, the exponential and their sum, each fp32 [tokens, vocab / tp] (the product comes
  // once the exponential is freed).
  if (spec == "off" && engine.torch_loss_parallel)
    return 16 * tokens * static_cast<double>(c.vocab) / static_cast<double>(layout.tp);
  const int64_t micro_batch_tokens = recipe.train.micro_batch_size * recipe.data.seq_len;
  const int64_t engine_chunk = layout::loss_chunk_tokens(spec, c.vocab, micro_batch_tokens);
  double chunk = engine_chunk == 0 ? tokens : static_cast<double>(engine_chunk);
  chunk = std::clamp(chunk, 1.0, std::max(1.0, std::min(tokens, static_cast<double>(micro_batch_tokens))));
  return layout::loss_bytes(tokens, chunk, c.vocab, c.hidden, layout.tp, element);
}

// The memory of the pipeline rank whose share is `share`. Its transient memory peaks at one of two
// moments: at the loss, where every micro batch in flight still holds its activations and the
// head's weight and gradient (gathered, where sharded), the loss's logits and the next block's
// prefetched weight are live; or in a block's backward, with the running block's weight and
// gradient and the prefetched block's weight gathered, the rerun layer's whole set under
// recompute, and a MoE layer's expert gradient sums. The terms are those of the larger.
MemoryEstimate rank_memory(const ModelCensus& c, const config::Recipe& recipe, const ClusterLayout& layout,
                           const HardwareProfile& hardware, const StageShare& share, const CommunicationOverlap& engine) {
  const double element = element_bytes(recipe);
  const double dense_shards = static_cast<double>(layout.fsdp * layout.cp);
  const double expert_shards = static_cast<double>(layout.expert_shards());
  MemoryEstimate e;
  e.terms.push_back({"model state (dense)", share.dense * kStateBytes / dense_shards,
                     fmt::format("{:.3g} parameters x 16 B / {} shards", share.dense, dense_shards),
                     "parallel.fsdp (more shards), parallel.tp or parallel.pp"});
  if (share.experts > 0)
    e.terms.push_back({"model state (experts)", share.experts * kStateBytes / expert_shards,
                       fmt::format("{:.3g} parameters x 16 B / {} expert shards", share.experts, expert_shards),
                       "parallel.ep, or more data ranks to shard the experts over"});
  // Only what is sharded is gathered: experts that ep alone splits stay whole on their rank.
  double largest_unit = 0, largest_experts = 0;
  for (const auto& layer : c.layers) {
    const double dense = static_cast<double>(layer.total() - layer.experts) / static_cast<double>(layout.tp);
    const double experts = static_cast<double>(layer.experts) / static_cast<double>(layout.tp * layout.ep);
    largest_unit = std::max(largest_unit, (dense_shards > 1 ? dense : 0) + (expert_shards > 1 ? experts : 0));
    largest_experts = std::max(largest_experts, experts);
  }
  const double head_unit = dense_shards > 1 ? share.head : 0;

  // Activations: the tokens of one micro batch on this rank, through the rank's layers, as many
  // at once as its schedule holds.
  const auto& t = recipe.train;
  const double tokens = static_cast<double>(t.micro_batch_size * recipe.data.seq_len) / static_cast<double>(layout.cp);
  const int64_t data_ranks = layout.data_ranks();
  const double micro_batches = std::max<double>(1, static_cast<double>(t.global_batch_size) /
                                                       static_cast<double>(data_ranks * t.micro_batch_size));
  const auto& m = recipe.memory;
  const auto held = held_activations(c, recipe, layout, share, element, tokens, micro_batches, engine);
  const bool chunked = m.chunked_loss != "off" || layout.tp > 1;
  const double logits = loss_bytes(c, recipe, layout, tokens, element, engine);

  Moment at_loss, in_block;
  at_loss.gathered = 8 * head_unit + 4 * largest_unit;
  at_loss.activations = held.bytes;
  // Where the head is not sharded its gradient is not a fresh buffer the loss can sum into: the
  // loss keeps one of its own (fp32, the rank's part of the table) until the head's backward.
  at_loss.logits = logits + (head_unit == 0 ? 4 * share.head : 0);
  // The unit behind reduces: its full gradient, and the shard-sized buffer it reduces into.
  const double behind = std::max(largest_unit, head_unit);
  in_block.gathered = 12 * largest_unit + 4 * behind * (1 + 1 / dense_shards);
  in_block.activations = held.bytes + held.rerun;
  in_block.expert_sums = 2 * 4 * largest_experts;
  const bool loss_peaks = share.head > 0 && at_loss.total() >= in_block.total();
  const Moment& peak = loss_peaks ? at_loss : in_block;

  if (largest_unit > 0 || head_unit > 0)
    e.terms.push_back({"gathered units", peak.gathered,
                       loss_peaks ? "the head's full fp32 weight and gradient and the next block's weight, at the loss"
                                  : "the running block's full fp32 weight and gradient, the next one's weight, "
                                    "the gradient behind still reducing",
                       "parallel.tp or parallel.ep (smaller units)"});
  const bool recomputed = m.recompute == memory::Recompute::full && m.recompute_ratio > 0;
  e.terms.push_back(
      {"activations", peak.activations,
       fmt::format("{:.0f} tokens a micro batch, {} layers, {:.1f} micro batches in flight{}", tokens, share.layers,
                   held.in_flight,
                   recomputed ? (loss_peaks ? ", recomputed layers keep their input"
                                            : ", recomputed layers keep their input, one reruns")
                              : ""),
       fmt::format("memory.recompute full{}, a smaller train.micro_batch_size (now {}), "
                   "parallel.sequence_parallel with tp, or parallel.cp",
                   m.recompute == memory::Recompute::full ? " (on) with memory.offload_activations" : "",
                   t.micro_batch_size)});
  const bool torch_loss_parallel = engine.torch_loss_parallel && m.chunked_loss == "off" && layout.tp > 1;
  e.terms.push_back({"logits and loss", peak.logits,
                     !loss_peaks          ? "not live at the peak, a block's backward"
                     : torch_loss_parallel ? "the rank's vocabulary of the whole micro batch's logits, four fp32 copies "
                                             "in torch loss_parallel's backward"
                     : chunked             ? "one fp32 chunk of logits (at most 128 MiB) and its copy in the compute "
                                             "dtype, the gradients of the head's input and (where not sharded) weight"
                                           : "the whole micro batch's logits, three fp32 copies in the log-softmax's "
                                             "backward",
                     "memory.chunked_loss auto"});
  // A MoE layer's experts are one stacked weight, taken apart by one unbind: its backward holds
  // every expert's gradient (a stack's worth in all) and stacks them into a second.
  if (largest_experts > 0)
    e.terms.push_back({"expert gradient sums", peak.expert_sums,
                       loss_peaks ? "not live at the peak, the loss"
                                  : "two fp32 gradients of a layer's stacked experts during its backward",
                       "parallel.ep"});
  // What the allocator holds beyond the live tensors: freed blocks kept for reuse and not reused,
  // a fraction of the memory that comes and goes within a step; model state lives for the whole run.
  const double transient = peak.total();
  if (hardware.allocator_overhead > 0)
    e.terms.push_back({"allocator", hardware.allocator_overhead * transient,
                       fmt::format("{:.0f}% of the memory a step allocates and frees", 100 * hardware.allocator_overhead),
                       ""});
  e.terms.push_back({"runtime", hardware.runtime_gib * kGiB, "the hardware profile's fixed footprint", ""});
  return e;
}

}  // namespace

MemoryEstimate estimate_memory(const ModelCensus& c, const config::Recipe& recipe, const ClusterLayout& layout,
                               const HardwareProfile& hardware, const CommunicationOverlap& engine) {
  // The fullest pipeline rank: the first holds more micro batches in flight, the last the head
  // and its logits; which one peaks depends on the model and the schedule.
  MemoryEstimate fullest;
  for (int64_t rank = 0; rank < layout.pp; ++rank) {
    auto estimate = rank_memory(c, recipe, layout, hardware, pipeline_rank_share(c, layout, rank), engine);
    estimate.pipeline_rank = rank;
    if (rank == 0 || estimate.total() > fullest.total()) fullest = std::move(estimate);
  }
  fullest.pipeline_ranks = layout.pp;
  return fullest;
}

}  // namespace xtrain::plan
