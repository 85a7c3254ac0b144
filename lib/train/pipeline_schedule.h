// Pipeline schedules (parallel.pp_schedule): the order in which one pipeline rank runs the
// forwards and backwards of its chunks on the step's micro batches, and their run, moving
// activations forward and their gradients back to the neighbouring ranks.
//   gpipe             every forward, then every backward;
//   1f1b              pp - rank - 1 warm-up forwards, then one forward and one backward in turn,
//                     then the remaining backwards: at most pp micro batches in flight on rank 0;
//   interleaved_1f1b  v chunks per rank (chunk c on rank c mod pp), micro batches in groups of
//                     pp, Megatron's warm-up of (pp - rank - 1) x 2 + (v - 1) x pp forwards;
//   zb_h1             1f1b's order with each backward split into B, the input gradient sent
//                     upstream at once, and W, the Linear layers' weight gradients
//                     (model/layers/weight_grad_store.h), deferred to fill the cooldown's waits;
//   zbv               two chunks a rank in a V (config/pipeline_layout.h's placement), split
//                     backwards; the last rank hands its first chunk's output to its second
//                     (and the gradient back) in memory;
//   dualpipev         the same V in PyTorch's ScheduleDualPipeV order: in the steady state each
//                     forward of one chunk is paired with a whole backward of the other
//                     (OVERLAP_F_B, run one after the other on one stream); only the cool-down's
//                     last backwards are split, their W filling its waits.
// Sends never block (they complete by the end of the step); a rank blocks only on the receive of
// an input it needs next, so every schedule's order, being a valid pipeline order on each rank,
// cannot deadlock. Each tensor goes with its shape first, so micro batches of any length pass.
// Activations and gradients travel under different tags: between two ranks (the wrap-around of
// interleaving on 2 ranks) each stream keeps its own order.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>
#include <c10/core/Device.h>

#include "data/micro_batch.h"
#include "model/layers/weight_grad_store.h"
#include "parallel/comm.h"
#include "parallel/pipeline_stage.h"
#include "config/pipeline_layout.h"
#include "config/recipe_choices.h"
#include "train/schedule.h"

namespace xtrain::train {

using config::PipelineAction;  // the schedules' order: config/pipeline_layout.h
using config::pipeline_actions;

class PipelineSchedule final : public Schedule {
 public:
  // pp_group: the ranks of this rank's pipeline, by stage; `stage` runs this rank's chunks.
  PipelineSchedule(config::PpSchedule schedule, parallel::PipelineStage& stage, std::shared_ptr<parallel::Comm> pp_group,
                   int64_t virtual_stages, torch::Device device);

  std::string name() const override { return to_string(schedule_); }
  MicroBatchLosses run(const std::vector<data::MicroBatch>& micro_batches, MicroBatchWork& work) override;
  // Micro batch by micro batch, each through this rank's chunks in order; the losses come back
  // on the last stage.
  MicroBatchLosses evaluate(const std::vector<data::MicroBatch>& micro_batches, MicroBatchWork& work) override;
  double last_idle_seconds() const override { return idle_seconds_; }
  // Forward done, backward (zb_h1: its W) not yet: pp for 1f1b on stage 0, every micro batch for
  // gpipe, pp on every stage for zb_h1; over both chunks for the V schedules.
  int64_t last_peak_in_flight() const override { return peak_in_flight_; }
  PassSeconds last_pass_seconds() const override { return passes_; }

 private:
  // Chunk `chunk`'s (virtual index) forward through the stage, which holds its parameters.
  template <typename Forward>
  ChunkOutput run_chunk(int64_t chunk, const torch::Tensor& input, Forward&& forward);
  torch::Tensor receive(int64_t peer, int64_t tag, const torch::TensorOptions& options);
  void send(const torch::Tensor& tensor, int64_t peer, int64_t tag);
  // What flows between chunk `global` and its neighbours for micro batch m: received from the
  // neighbour's rank, or, where that is this rank (zbv), handed over in memory.
  torch::Tensor take_input(int64_t global, int64_t m, const torch::TensorOptions& options);
  void give_output(int64_t global, int64_t m, const torch::Tensor& output);
  torch::Tensor take_gradient(int64_t global, int64_t m, const torch::TensorOptions& options);
  void give_input_gradient(int64_t global, int64_t m, const torch::Tensor& gradient);

  config::PpSchedule schedule_;
  parallel::PipelineStage& stage_;
  std::shared_ptr<parallel::Comm> group_;
  torch::Device device_;
  double idle_seconds_ = 0;
  int64_t peak_in_flight_ = 0;
  PassSeconds passes_;
  std::vector<parallel::PendingCollective> sends_;
  std::vector<torch::Tensor> in_flight_;  // what the sends read, alive until they complete
  model::WeightGradStore weight_grads_;  // zb_h1, zbv, dualpipev: what this rank's B passes defer
  // In-memory hand-overs, by (receiving chunk, micro batch).
  std::map<std::pair<int64_t, int64_t>, torch::Tensor> handed_inputs_, handed_gradients_;
};

}  // namespace xtrain::train
