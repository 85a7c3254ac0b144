#include "plan/memory_estimate.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

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

MemoryEstimate estimate_memory(const ModelCensus& c, const config::Recipe& recipe, const ClusterLayout& layout,
                               const HardwareProfile& hardware) {
  const auto share = stage_share(c, layout);
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

  // Activations: the tokens of one micro batch on this rank, through the stage's layers, times
  // the micro batches a stage holds at once.
  const auto& t = recipe.train;
  const double tokens = static_cast<double>(t.micro_batch_size * recipe.data.seq_len) / static_cast<double>(layout.cp);
  const int64_t data_ranks = layout.data_ranks();
  const double micro_batches = std::max<double>(1, static_cast<double>(t.global_batch_size) /
                                                       static_cast<double>(data_ranks * t.micro_batch_size));
  double in_flight = 1;
  if (layout.pp > 1) {
    const double pp = static_cast<double>(layout.pp), v = static_cast<double>(layout.virtual_stages);
    in_flight = recipe.parallel.pp_schedule == config::PpSchedule::gpipe ? micro_batches : std::min(micro_batches, pp);
    if (recipe.parallel.pp_schedule == config::PpSchedule::interleaved_1f1b) in_flight *= 1 + (pp - 1) / (pp * v);
  }
  const auto& m = recipe.memory;
  const double recompute = m.recompute == memory::Recompute::full ? m.recompute_ratio : 0;
  const int64_t per_stage = (static_cast<int64_t>(c.layers.size()) + layout.pp - 1) / layout.pp;
  double kept = 0, widest = 0;
  for (int64_t i = 0; i < std::min<int64_t>(per_stage, static_cast<int64_t>(c.layers.size())); ++i) {
    const double full = layer_activation_bytes(c, c.layers[static_cast<size_t>(i)], layout, element) * tokens;
    widest = std::max(widest, full);
    const bool recomputes = static_cast<double>(i) < recompute * static_cast<double>(per_stage);
    const double input = tokens * element *
                         (layout.sequence_parallel ? static_cast<double>(c.hidden) / static_cast<double>(layout.tp)
                                                   : static_cast<double>(c.hidden));
    kept += recomputes ? (m.offload_activations ? 0 : input) : full;
  }
  const double activations = kept * in_flight + (recompute > 0 ? widest : 0);
  e.terms.push_back(
      {"activations", activations,
       fmt::format("{:.0f} tokens a micro batch, {} layers, {:.1f} micro batches in flight{}", tokens, per_stage,
                   in_flight, recompute > 0 ? ", recomputed layers keep their input" : ""),
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
  // A MoE layer's experts are one stacked weight; each expert's slice of it passes autograd a
  // gradient the size of the whole stack (a slice's backward), summed into the stack's: two
  // fp32 stacks at once during the layer's backward.
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

}  // namespace xtrain::plan
