#include "train/schedule.h"

#include <stdexcept>

#include <torch/torch.h>

namespace xtrain::train {

namespace {
torch::Tensor sum(const torch::Tensor& total, const torch::Tensor& value) {
  if (!value.defined()) return total;
  return total.defined() ? total + value : value;
}
}  // namespace

void MicroBatchLosses::add(const MicroBatchLosses& other) {
  loss_sum = sum(loss_sum, other.loss_sum);
  for (const auto& [name, value] : other.aux_losses) aux_losses[name] = sum(aux_losses[name], value);
  expert_load = sum(expert_load, other.expert_load);
  dropped = sum(dropped, other.dropped);
}

MicroBatchLosses GradientAccumulation::run(const std::vector<data::MicroBatch>& micro_batches,
                                           const ForwardBackward& forward_backward) {
  MicroBatchLosses total;
  const auto count = static_cast<int64_t>(micro_batches.size());
  for (int64_t index = 0; index < count; ++index)
    total.add(forward_backward(micro_batches[static_cast<size_t>(index)], index, count));
  return total;
}

std::unique_ptr<Schedule> make_schedule(int64_t pipeline_stages) {
  if (pipeline_stages != 1) throw std::invalid_argument("pipeline schedules are not built yet (parallel.pp 1)");
  return std::make_unique<GradientAccumulation>();
}

}  // namespace xtrain::train
