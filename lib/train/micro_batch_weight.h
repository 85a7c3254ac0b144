// The weight of a micro batch's mean loss before backward: the one place where gradients get
// their scale. Every target token of the global batch (a label other than the ignore index:
// padding and chat prompts carry none) weighs the same, whichever micro batch and data-parallel
// rank holds it. So a micro batch's mean loss counts by its share of the global batch's targets,
// and the sum over micro batches and ranks of the weighted gradients (what accumulation and the
// data-parallel reduction add up) is the gradient of the global batch's mean loss.
#pragma once
#include <cstdint>
#include <vector>

namespace xtrain::data {
struct MicroBatch;
}

namespace xtrain::train {

// This rank's part of the global batch's target count: its micro batches' target_count times
// data_share, which is 1 on the rank that speaks for its data-parallel replica and 0 on ranks
// that hold the same samples again (tensor-parallel peers, earlier pipeline stages), so that
// summed over all ranks each target counts once.
double local_target_count(const std::vector<data::MicroBatch>& micro_batches, double data_share);

// The factor on a micro batch's mean loss: micro_batch_targets / global_targets (the sum of
// local_target_count over all ranks) times loss_scale (fp16's dynamic loss scale, else 1).
// 0 when the global batch has no targets (chat samples without an answer): the step moves nothing.
double micro_batch_loss_weight(int64_t micro_batch_targets, double global_targets, double loss_scale = 1.0);

}  // namespace xtrain::train
