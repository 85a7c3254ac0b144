// One optimizer step's time on one rank, term by term, for a recipe on a cluster layout:
//   GEMMs           6 FLOPs a parameter a token (forward and both gradients) of the matrices a
//                   token passes through on this rank, at the profile's GEMM efficiency of its
//                   published maximum achievable matmul rate (of its peak without one),
//                   experts at its grouped-GEMM efficiency x t / (t + half) for t tokens an
//                   expert, plus full recompute's second forward; under FP8 the linear layers at
//                   the profile's published FP8 GEMM rate for K = the hidden size, and their
//                   scaling casts (memory bound), or, where the engine's FP8 linear layers have a
//                   published speedup over the compute dtype's (torchao), at that speedup;
//   attention       the score and value products of the keys each query sees (causal: half the
//                   sequence; a sliding window fewer), at the profile's published kernel rate for
//                   the head dimension and sequence length (the backward 2.5x the forward's
//                   FLOPs), or without a table at its attention efficiency of peak (selective and
//                   full recompute add a forward);
//   elementwise     norms, rotary, activations and residuals, bound by memory bandwidth;
//   optimizer       AdamW over this rank's shard, bound by memory bandwidth;
//   Muon            with optim.name muon, its Newton-Schulz FLOPs and its matrices' assembly
//                   (plan/muon_cost.h);
//   communication   each collective's bytes over the link its group uses (inside a node or
//                   across nodes), ring algorithms, less what overlaps compute: FSDP's gathers
//                   and reductions (prefetched), data-parallel gradients (behind the last
//                   backward), tensor parallelism (exposed), ring attention (behind attention),
//                   the experts' all-to-all (behind their GEMMs with Domino-EP), pipeline sends;
//                   CommunicationOverlap states where another engine overlaps more;
//   expert load    under expert parallelism the step waits for the rank that holds the busiest
//                   expert (expert_rank_load), its share of the experts' GEMMs beyond the mean;
//   pipeline bubble (pp - 1) / (micro batches x virtual stages) of the compute.
// A group that spans nodes with k of its ranks in each node drives k NICs at once (one NIC a
// device, rail-aligned), so its ring runs at min(NVLink, k x NIC).
// MFU counts the model's FLOPs as Megatron and torchtitan do (6 per parameter per token plus
// the full attention square, no recompute) over the step time and the dtype's peak.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "config/recipe.h"
#include "plan/cluster_layout.h"
#include "plan/hardware_profile.h"
#include "plan/model_census.h"

namespace xtrain::plan {

// How the engine that runs the recipe overlaps its communication, where it differs from xtrain's
// own: the planner's defaults describe xtrain; published runs of other engines state theirs.
struct CommunicationOverlap {
  // Tensor-parallel collectives run behind the GEMMs they feed (Megatron's --tp-comm-overlap,
  // torchtitan's async TP) instead of being exposed.
  bool tp_behind_gemms = false;
  // Data parallelism with a distributed optimizer (ZeRO-1, Megatron's): fp32 gradients are
  // reduce-scattered behind the last micro batch's backward and the updated parameters
  // all-gathered behind the next step's first forward, instead of one fp32 all-reduce.
  bool distributed_optimizer = false;
  // FSDP gathers each unit once a step and reduce-scatters once, keeping it gathered across the
  // micro batches (torchtitan under pipeline parallelism), instead of once a micro batch.
  bool fsdp_once_per_step = false;
  // Beside communication, how the engine recomputes under memory.recompute selective: torchtitan's
  // per-op policy ("op") saves attention's output and every odd matrix product of a block and
  // recomputes the rest (wk, wo and w3 of a llama block, in the order its forward runs them),
  // where xtrain's selective recompute reruns attention alone.
  bool selective_every_second_matmul = false;
  // And how it takes an unchunked loss over a vocabulary split by tp: torch's loss_parallel
  // (DTensor, torchtitan's) runs its log-softmax and NLL backward as one expression that holds four
  // fp32 copies of the rank's logits, where xtrain's vocabulary-parallel loss holds one chunk.
  bool torch_loss_parallel = false;
};

struct TimeTerm {
  std::string name;
  double seconds = 0;  // what the step waits for (exposed)
  std::string detail;
};

struct StepTimeEstimate {
  std::vector<TimeTerm> terms;
  double model_flops = 0;  // per rank per step
  double peak_flops = 0;   // per rank, the dtype's
  double tokens_per_step = 0;  // whole job
  int64_t world = 1;
  double seconds() const;
  double mfu() const { return model_flops / (seconds() * peak_flops); }
  double tokens_per_second_per_device() const { return tokens_per_step / seconds() / static_cast<double>(world); }
};

// The bandwidth (bytes/s) one rank of a ring over `ranks` ranks, `stride` apart in rank order,
// reaches: NVLink inside a node; across nodes min(NVLink, k x NIC) with k of its ranks a node.
double ring_bandwidth(int64_t ranks, int64_t stride, const ClusterLayout& layout, const HardwareProfile& hardware);

// The busiest expert-parallel rank's routed tokens over the mean rank's, where the busiest of
// `experts` experts takes `load_ratio` x the mean expert's tokens and the others share the rest
// evenly, `experts / ep` experts a rank: 1 without expert parallelism, `load_ratio` with one
// expert a rank.
double expert_rank_load(double load_ratio, int64_t experts, int64_t ep);

StepTimeEstimate estimate_step_time(const ModelCensus& census, const config::Recipe& recipe,
                                    const ClusterLayout& layout, const HardwareProfile& hardware,
                                    const CommunicationOverlap& overlap = {});

}  // namespace xtrain::plan
