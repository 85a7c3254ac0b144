// Schedule: owns the micro-batch loop of one optimizer step on one rank. It decides the order
// in which the rank's micro batches run forward and backward and calls forward_backward for
// each; gradients accumulate in the parameters, and the step's losses come back summed.
// GradientAccumulation, the first schedule, runs them one after another; pipeline schedules
// (1F1B, interleaved) implement the same interface.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "data/micro_batch.h"

namespace xtrain::train {

// Losses of one or more micro batches: summed over their targets (not averaged), detached, in
// float64 on the device, so that the step reads them from the device once.
struct MicroBatchLosses {
  torch::Tensor loss_sum;
  std::map<std::string, torch::Tensor> aux_losses;  // by name, as the model reports them
  torch::Tensor expert_load, dropped;               // summed, as the model reports them
  void add(const MicroBatchLosses& other);
};

// The forward and backward of micro batch `index` of `count` on this rank.
using ForwardBackward =
    std::function<MicroBatchLosses(const data::MicroBatch& batch, int64_t index, int64_t count)>;

class Schedule {
 public:
  virtual ~Schedule() = default;
  virtual std::string name() const = 0;
  virtual MicroBatchLosses run(const std::vector<data::MicroBatch>& micro_batches,
                               const ForwardBackward& forward_backward) = 0;
};

class GradientAccumulation final : public Schedule {
 public:
  std::string name() const override { return "gradient accumulation"; }
  MicroBatchLosses run(const std::vector<data::MicroBatch>& micro_batches,
                       const ForwardBackward& forward_backward) override;
};

// The schedule of a recipe; today always GradientAccumulation (parallel.pp is 1).
std::unique_ptr<Schedule> make_schedule(int64_t pipeline_stages);

}  // namespace xtrain::train
