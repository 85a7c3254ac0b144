#include "plan/memory_estimate.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include <fmt/format.h>

#include "config/pipeline_layout.h"
#include "plan/stage_share.h"

namespace xtrain::plan {
namespace {

constexpr double kStateBytes = 16;  // fp32 weight, gradient, and AdamW's two moments
constexpr double kExpertImbalance = 1.25;  // dropless routing: the busiest expert's rows over the mean

// Bytes one token leaves in a layer for backward, on this rank, without recompute.
double layer_activation_bytes(const ModelCensus& c, const LayerCensus& layer, const ClusterLayout& layout,
                              double element) {
  const auto tp = static_cast<double>(layout.tp);
  const double stream = layout.sequence_parallel ? static_cast<double>(c.hidden) / tp : static_cast<double>(c.hidden);
  // Attention: the norm's input and output, q, k, v and the attention output.
  double per_token = 2 * stream + static_cast<double>(c.query_width + 2 * c.key_width + c.value_width) / tp;
  per_token += 2 * stream;  // the MLP's norm input and output
  if (layer.experts > 0) {
    const double rows = static_cast<double>(c.top_k) * kExpertImbalance / tp;
    per_token += rows * static_cast<double>(2 * c.hidden + 3 * c.moe_intermediate);
    per_token += static_cast<double>(3 * c.moe_intermediate * c.shared_experts) / tp;
    per_token += static_cast<double>(c.experts) * 4 / element;  // router logits, fp32
  } else {
    per_token += 3 * static_cast<double>(c.intermediate) / tp;  // gate, up, and their product
  }
  return per_token * element;
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

double activation_bytes(const config::Recipe& recipe) { return recipe.train.dtype == config::Dtype::fp32 ? 4 : 2; }

namespace {

// Activations a pipeline rank holds at its fullest: what a micro batch keeps for backward in each
// of its chunks (recompute keeps only the input of its first share of the rank's layers, and one
// layer's whole set while it reruns), held from a chunk's forward to its backward in the order the
// rank's schedule runs them (config/pipeline_layout.h).
struct HeldActivations {
  double bytes = 0;       // the peak, the rerun layer's set included
  double in_flight = 0;   // the peak in micro batches of the rank's whole share
};

HeldActivations held_activations(const ModelCensus& c, const config::Recipe& recipe, const ClusterLayout& layout,
                                 const StageShare& share, double element, double tokens, double micro_batches) {
  const auto& m = recipe.memory;
  const double recompute = m.recompute == memory::Recompute::full ? m.recompute_ratio : 0;
  std::vector<double> chunk_kept;
  double widest = 0;
  int64_t ordinal = 0;
  for (const auto& [first, last] : share.chunk_layers) {
    double kept = 0;
    for (int64_t i = first; i < last; ++i, ++ordinal) {
      const double full = layer_activation_bytes(c, c.layers[static_cast<size_t>(i)], layout, element) * tokens;
      widest = std::max(widest, full);
      const bool recomputes = static_cast<double>(ordinal) < recompute * static_cast<double>(share.layers);
      const double input = tokens * element *
                           (layout.sequence_parallel ? static_cast<double>(c.hidden) / static_cast<double>(layout.tp)
                                                     : static_cast<double>(c.hidden));
      kept += recomputes ? (m.offload_activations ? 0 : input) : full;
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
      live += (action.forward ? 1 : -1) * chunk_kept[static_cast<size_t>(action.chunk)];
      held = std::max(held, live);
    }
  }
  return {held + (recompute > 0 ? widest : 0), one_micro_batch > 0 ? held / one_micro_batch : 0};
}

// The memory of the pipeline rank whose share is `share`.
MemoryEstimate rank_memory(const ModelCensus& c, const config::Recipe& recipe, const ClusterLayout& layout,
                           const HardwareProfile& hardware, const StageShare& share) {
  const double element = activation_bytes(recipe);
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
  if (dense_shards > 1 || expert_shards > 1) {
    // Only what is sharded is gathered: experts that ep alone splits stay whole on their rank.
    double largest_unit = 0;
    for (const auto& layer : c.layers) {
      const double dense = static_cast<double>(layer.total() - layer.experts) / static_cast<double>(layout.tp);
      const double experts = static_cast<double>(layer.experts) / static_cast<double>(layout.tp * layout.ep);
      largest_unit = std::max(largest_unit, (dense_shards > 1 ? dense : 0) + (expert_shards > 1 ? experts : 0));
    }
    e.terms.push_back({"gathered units", 2 * 8 * largest_unit + (dense_shards > 1 ? 8 * share.head : 0),
                       "two layers' full fp32 parameters and gradients (running and prefetched), the head's",
                       "parallel.tp or parallel.ep (smaller units)"});
  }

  // Activations: the tokens of one micro batch on this rank, through the rank's layers, as many
  // at once as its schedule holds.
  const auto& t = recipe.train;
  const double tokens = static_cast<double>(t.micro_batch_size * recipe.data.seq_len) / static_cast<double>(layout.cp);
  const int64_t data_ranks = layout.data_ranks();
  const double micro_batches = std::max<double>(1, static_cast<double>(t.global_batch_size) /
                                                       static_cast<double>(data_ranks * t.micro_batch_size));
  const auto& m = recipe.memory;
  const auto held = held_activations(c, recipe, layout, share, element, tokens, micro_batches);
  const double activations = held.bytes, in_flight = held.in_flight;
  const bool recomputed = m.recompute == memory::Recompute::full && m.recompute_ratio > 0;
  e.terms.push_back(
      {"activations", activations,
       fmt::format("{:.0f} tokens a micro batch, {} layers, {:.1f} micro batches in flight{}", tokens, share.layers,
                   in_flight, recomputed ? ", recomputed layers keep their input" : ""),
       fmt::format("memory.recompute full{}, a smaller train.micro_batch_size (now {}), "
                   "parallel.sequence_parallel with tp, or parallel.cp",
                   m.recompute == memory::Recompute::full ? " (on) with memory.offload_activations" : "",
                   t.micro_batch_size)});
  const double vocab = static_cast<double>(c.vocab) / static_cast<double>(layout.tp);
  const bool chunked = m.chunked_loss != "off";
  const double logits = chunked ? std::min(256.0 * 1024 * 1024, tokens * vocab * 8) : tokens * vocab * (element + 8);
  e.terms.push_back({"logits and loss", share.head > 0 ? logits : 0,
                     chunked ? "the chunked loss's chunk (at most 256 MiB)" : "the whole micro batch's logits",
                     "memory.chunked_loss auto"});
  // A MoE layer's experts are one stacked weight, taken apart by one unbind: its backward holds
  // every expert's gradient (a stack's worth in all) and stacks them into a second: two fp32
  // stacks at once during the layer's backward.
  double largest_experts = 0;
  for (const auto& layer : c.layers)
    largest_experts = std::max(largest_experts, static_cast<double>(layer.experts) /
                                                    static_cast<double>(layout.tp * layout.ep));
  if (largest_experts > 0)
    e.terms.push_back({"expert gradient sums", 2 * 4 * largest_experts,
                       "two fp32 gradients of a layer's stacked experts during its backward", "parallel.ep"});
  // What the allocator holds beyond the live tensors: freed blocks kept for reuse (a caching
  // allocator's, or a heap's that keeps freed memory), a fraction of the memory that comes and
  // goes within a step; model state lives for the whole run.
  double transient = 0;
  for (const auto& term : e.terms)
    if (term.name.rfind("model state", 0) != 0) transient += term.bytes;
  if (hardware.allocator_overhead > 0)
    e.terms.push_back({"allocator", hardware.allocator_overhead * transient,
                       fmt::format("{:.0f}% of the memory a step allocates and frees", 100 * hardware.allocator_overhead),
                       ""});
  e.terms.push_back({"runtime", hardware.runtime_gib * kGiB, "the hardware profile's fixed footprint", ""});
  return e;
}

}  // namespace

MemoryEstimate estimate_memory(const ModelCensus& c, const config::Recipe& recipe, const ClusterLayout& layout,
                               const HardwareProfile& hardware) {
  // The fullest pipeline rank: the first holds more micro batches in flight, the last the head
  // and its logits; which one peaks depends on the model and the schedule.
  MemoryEstimate fullest;
  for (int64_t rank = 0; rank < layout.pp; ++rank) {
    auto estimate = rank_memory(c, recipe, layout, hardware, pipeline_rank_share(c, layout, rank));
    estimate.pipeline_rank = rank;
    if (rank == 0 || estimate.total() > fullest.total()) fullest = std::move(estimate);
  }
  fullest.pipeline_ranks = layout.pp;
  return fullest;
}

}  // namespace xtrain::plan
