#include "train/micro_batch_weight.h"

#include "data/micro_batch.h"

namespace xtrain::train {

double local_target_count(const std::vector<data::MicroBatch>& micro_batches, double data_share) {
  double targets = 0;
  for (const auto& micro_batch : micro_batches) targets += static_cast<double>(micro_batch.target_count);
  return targets * data_share;
}

double micro_batch_loss_weight(int64_t micro_batch_targets, double global_targets, double loss_scale) {
  if (global_targets <= 0) return 0.0;
  return loss_scale * (static_cast<double>(micro_batch_targets) / global_targets);
}

}  // namespace xtrain::train
