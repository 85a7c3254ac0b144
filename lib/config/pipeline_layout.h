// The pipeline layout a recipe implies, without a tensor in sight, so that the engine and the
// planner (plan/, which links no LibTorch) share one rule:
//   - pipeline_chunks: which layers each of the pp x v chunks holds, as parallel.pp_layers says
//     or else balanced: the embedding and the head
//     count as one layer each: chunk k takes slots [k S / chunks, (k + 1) S / chunks)
//     of the S = layers + 2 slots embedding, layer 0, ..., layer L-1, head. Multi-token
//     prediction's D depths (layers L .. L+D-1) follow the head as D more slots, all on the last
//     chunk beside it (DeepSeek-V3's placement), which the other cuts make room for;
//   - PipelinePlacement: which rank runs each chunk: chunk c on rank c mod pp (a loop), or, for
//     zbv and dualpipev, chunks r and 2 pp - 1 - r on rank r (a V: the first rank holds the
//     embedding and the head, and the last rank hands chunk pp - 1's output to its own chunk pp
//     without a send);
//   - pipeline_actions: the order in which one pipeline rank runs the forwards and backwards of
//     its chunks on a step's micro batches (train/pipeline_schedule.h runs it). zb_h1 splits each
//     backward into B (the input gradient, which the previous stage waits for) and W (the weight
//     gradients), the order of PyTorch's ScheduleInterleavedZeroBubble with one chunk per rank
//     (scripts/pipeline_orders.py prints both); zbv is PyTorch's ScheduleZBVZeroBubble, and
//     dualpipev its ScheduleDualPipeV (DeepSeek's DualPipe folded into the V), whose steady state
//     pairs a forward of one chunk with a whole backward of the other (OVERLAP_F_B).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "config/recipe_choices.h"

namespace xtrain::config {

struct PipelineChunk {
  int64_t first_layer = 0, last_layer = 0;  // layers [first, last); the head chunk's end with the depths
  bool embedding = false, head = false;
};

// `layers` decoder layers and `depths` prediction depths after them. Throws
// std::invalid_argument when the layers and the two ends cannot fill `chunks` chunks.
std::vector<PipelineChunk> pipeline_chunks(int64_t layers, int64_t chunks, int64_t depths = 0);
// The recipe's own cut (parallel.pp_layers): chunk k holds layers_per_chunk[k] consecutive
// layers, the first chunk the embedding before them, the last the head and the depths after
// them; empty, the balanced cut above. Throws std::invalid_argument (what is wrong, in the key's
// words) when there is not one count a chunk, they do not add up to `layers`, or a chunk between
// the two ends holds none.
std::vector<PipelineChunk> pipeline_chunks(int64_t layers, int64_t chunks, int64_t depths,
                                           const std::vector<int64_t>& layers_per_chunk);

struct PipelinePlacement {
  int64_t stages = 1, virtual_stages = 1;
  bool v_shape = false;  // zbv's and dualpipev's V, else chunk c on rank c mod stages
  std::vector<int64_t> layers_per_chunk;  // parallel.pp_layers, by global chunk; empty: the balanced cut

  int64_t chunks() const { return stages * virtual_stages; }
  // The global index of `rank`'s chunk `local` (its virtual index, in the order the rank holds them).
  int64_t global_chunk(int64_t rank, int64_t local) const;
  int64_t rank_of(int64_t global) const;
  // The rank that holds the head, where the loss is computed.
  int64_t head_rank() const { return rank_of(chunks() - 1); }
  // Every chunk's layers, in global order: the recipe's cut, or the balanced one.
  std::vector<PipelineChunk> cut(int64_t layers, int64_t depths) const {
    return pipeline_chunks(layers, chunks(), depths, layers_per_chunk);
  }
};

// Whether the schedule splits backwards into B and a deferred W (zb_h1, zbv; dualpipev some of
// them, its other backwards whole).
constexpr bool splits_backward(PpSchedule schedule) {
  return schedule == PpSchedule::zb_h1 || schedule == PpSchedule::zbv || schedule == PpSchedule::dualpipev;
}

// Whether rank r runs chunks r and 2 pp - 1 - r (zbv, dualpipev).
constexpr bool v_shaped(PpSchedule schedule) {
  return schedule == PpSchedule::zbv || schedule == PpSchedule::dualpipev;
}

// The fewest micro batches a step of `schedule` on `stages` ranks is laid out for: 2 pp for
// dualpipev (PyTorch's ScheduleDualPipeV refuses fewer), 1 otherwise (zbv lays out 2 pp - 1 and
// drops the actions of those past the step's).
constexpr int64_t min_micro_batches(PpSchedule schedule, int64_t stages) {
  return schedule == PpSchedule::dualpipev ? 2 * stages : 1;
}
// What to tell the recipe's author when a step has fewer: "{micro_batches}: dualpipev ...".
std::string min_micro_batches_problem(PpSchedule schedule, int64_t stages, int64_t micro_batches);

// What each chunk runs and where, for the run's log: "chunk 0 (rank 0): the embedding, layers
// 0-2; chunk 1 (rank 1): layer 3, the head" (the depths, when the last chunk holds them, as layers
// past the decoder's).
std::string describe_pipeline_cut(const std::vector<PipelineChunk>& chunks, const PipelinePlacement& placement);

PipelinePlacement pipeline_placement(PpSchedule schedule, int64_t stages, int64_t virtual_stages,
                                     std::vector<int64_t> layers_per_chunk = {});

struct PipelineAction {
  // A backward's part: whole (input and weight gradients at once), or, split, the input
  // gradient (B) and later the weight gradients it left (W).
  enum class Part { whole, input, weight };
  bool forward = true;
  int64_t chunk = 0;  // this rank's virtual index
  int64_t micro_batch = 0;
  Part part = Part::whole;  // backwards only
  // dualpipev: a forward that runs as one overlapped action (PyTorch's OVERLAP_F_B) with the next
  // one, a whole backward of the other chunk. One stream runs the two in turn, as PyTorch's
  // runtime does without an overlap callback; on two streams the backward would hide the
  // forward's communication.
  bool overlapped = false;
  // Whether the micro batch's activations are let go after this action.
  bool releases() const { return !forward && part != Part::input; }
};

std::vector<PipelineAction> pipeline_actions(PpSchedule schedule, int64_t stages, int64_t virtual_stages, int64_t rank,
                                             int64_t micro_batches);

// Every rank's actions, one line a rank, in PyTorch's notation (torch.distributed.pipelining):
// global chunk, F (forward), B (whole backward), I (input gradient) or W (weight gradients), micro
// batch: "rank 0: 0F0 0F1 0F2 0F3 0I0 0W0 ..."; an overlapped pair as "(0F7;7B0)OVERLAP_F_B".
std::string format_pipeline_actions(PpSchedule schedule, int64_t stages, int64_t virtual_stages,
                                    int64_t micro_batches);

}  // namespace xtrain::config
