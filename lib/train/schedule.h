// Schedule: owns the micro-batch loop of one optimizer step on one rank. It decides the order
// in which the rank's micro batches run forward and backward, and has the step's MicroBatchWork
// run each; gradients accumulate in the parameters, and the step's losses come back summed.
//   GradientAccumulation   one micro batch after another, each through the whole model;
//   PipelineSchedule       gpipe, 1f1b or interleaved 1f1b over a pipeline stage's chunks
//                          (train/pipeline_schedule.h).
// make_schedule() picks the one the parallel layout needs.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>
#include <c10/core/Device.h>

#include "config/recipe_choices.h"
#include "data/micro_batch.h"
#include "parallel/device_mesh.h"
#include "parallel/parallel_model.h"
#include "parallel/pipeline_stage.h"

namespace xtrain::train {

// Losses of one or more micro batches: summed over their targets (not averaged), detached, in
// float64 on the device, so that the step reads them from the device once.
struct MicroBatchLosses {
  torch::Tensor loss_sum;
  std::map<std::string, torch::Tensor> aux_losses;  // by name, as the model reports them
  torch::Tensor expert_load, dropped;               // summed, as the model reports them
  torch::Tensor correct;  // evaluation: targets that are the top-1 prediction, where measured
  void add(const MicroBatchLosses& other);
};

// What a pipeline chunk's forward gives: the activation for the next chunk, or on the model's
// last chunk the loss to differentiate (weighted for the step) and the micro batch's losses;
// on every chunk (losses) the router losses and expert loads of its layers.
struct ChunkOutput {
  torch::Tensor output;
  MicroBatchLosses losses;
};

// The work a schedule orders, as the training step does it.
class MicroBatchWork {
 public:
  virtual ~MicroBatchWork() = default;
  // Micro batch `index` of `count`: forward and backward through the model.
  virtual MicroBatchLosses forward_backward(const data::MicroBatch& batch, int64_t index, int64_t count) = 0;
  // A pipeline chunk's forward on micro batch `index` of `count`: the layers of `part` on
  // `input` (undefined for the model's first chunk), and the loss on its last.
  virtual ChunkOutput forward_chunk(const parallel::PipelineChunk& part, const data::MicroBatch& batch, int64_t index,
                                    int64_t count, const torch::Tensor& input) = 0;
  // Evaluation (under no_grad): the forward of the whole model, or of a pipeline chunk, unweighted.
  virtual MicroBatchLosses forward(const data::MicroBatch& batch) = 0;
  virtual ChunkOutput forward_chunk_only(const parallel::PipelineChunk& part, const data::MicroBatch& batch,
                                         const torch::Tensor& input) = 0;
};

class Schedule {
 public:
  virtual ~Schedule() = default;
  virtual std::string name() const = 0;
  virtual MicroBatchLosses run(const std::vector<data::MicroBatch>& micro_batches, MicroBatchWork& work) = 0;
  // Forwards only (evaluation, under no_grad); the losses come back where the loss is computed
  // (a pipeline's last stage).
  virtual MicroBatchLosses evaluate(const std::vector<data::MicroBatch>& micro_batches, MicroBatchWork& work) = 0;
  // Seconds of the last run spent waiting for a neighbour's activation or gradient: the bubble.
  virtual double last_idle_seconds() const { return 0; }
  // The most micro batches whose activations the last run held at once.
  virtual int64_t last_peak_in_flight() const { return 1; }
  // Seconds of the last run in forwards, backwards (whole, or the input gradient of a split one)
  // and deferred weight gradients (zb_h1's W), as the host saw them: the pipeline's passes.
  // Each kind of pass's seconds in the step, by the wall clock and by the rank's CPU time
  // (util/thread_cpu_clock.h; on a GPU, the time spent launching).
  struct PassSeconds {
    double forward = 0, backward = 0, weight = 0;
    double forward_cpu = 0, backward_cpu = 0, weight_cpu = 0;
  };
  virtual PassSeconds last_pass_seconds() const { return {}; }
};

class GradientAccumulation final : public Schedule {
 public:
  std::string name() const override { return "gradient accumulation"; }
  MicroBatchLosses run(const std::vector<data::MicroBatch>& micro_batches, MicroBatchWork& work) override;
  MicroBatchLosses evaluate(const std::vector<data::MicroBatch>& micro_batches, MicroBatchWork& work) override;
};

// The schedule of a layout: parallel.pp_schedule over a pipeline stage's chunks, else
// GradientAccumulation.
std::unique_ptr<Schedule> make_schedule(parallel::ParallelModel& model, const parallel::DeviceMesh& mesh,
                                        config::PpSchedule pp_schedule, int64_t virtual_stages,
                                        torch::Device device);

}  // namespace xtrain::train
