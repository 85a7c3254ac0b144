#include "train/schedule.h"

#include <stdexcept>

#include <torch/torch.h>

#include "train/pipeline_schedule.h"

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
  correct = sum(correct, other.correct);
}

MicroBatchLosses GradientAccumulation::run(const std::vector<data::MicroBatch>& micro_batches, MicroBatchWork& work) {
  MicroBatchLosses total;
  const auto count = static_cast<int64_t>(micro_batches.size());
  for (int64_t index = 0; index < count; ++index)
    total.add(work.forward_backward(micro_batches[static_cast<size_t>(index)], index, count));
  return total;
}

MicroBatchLosses GradientAccumulation::evaluate(const std::vector<data::MicroBatch>& micro_batches,
                                                MicroBatchWork& work) {
  MicroBatchLosses total;
  for (const auto& batch : micro_batches) total.add(work.forward(batch));
  return total;
}

std::unique_ptr<Schedule> make_schedule(parallel::ParallelModel& model, const parallel::DeviceMesh& mesh,
                                        config::PpSchedule pp_schedule, int64_t virtual_stages,
                                        torch::Device device) {
  if (auto* stage = model.pipeline_stage())
    return std::make_unique<PipelineSchedule>(pp_schedule, *stage, mesh.group(parallel::Dim::pp), virtual_stages,
                                              device);
  return std::make_unique<GradientAccumulation>();
}

}  // namespace xtrain::train
