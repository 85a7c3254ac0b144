// Steps whose loss or gradient norm is not finite are skipped, in every dtype: no update, a line in
// the log, a count in metrics.jsonl. Ranks take the same decision because the loss and the norm
// are already reduced over all of them. After max_in_a_row skipped steps in a row the run is
// diverging, and the trainer stops with exit 1 and the likely causes (XTuner skips such steps
// too; Megatron reruns them to tell a hardware fault from a bad step).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <torch/types.h>

namespace xtrain::train {

class NonFiniteGuard {
 public:
  explicit NonFiniteGuard(int64_t max_in_a_row) : max_in_a_row_(max_in_a_row) {}

  // true when the step may be applied; false records a skipped step.
  bool admit(int64_t step, double loss, double grad_norm);
  bool exhausted() const { return in_a_row_ >= max_in_a_row_; }
  int64_t in_a_row() const { return in_a_row_; }
  int64_t total() const { return total_; }
  int64_t first_of_run() const { return first_of_run_; }  // the first step of the current run of skips

 private:
  int64_t max_in_a_row_;
  int64_t in_a_row_ = 0, total_ = 0, first_of_run_ = 0;
};

// true when every element of every tensor is finite; one reduction per tensor and one host sync.
bool all_finite(const std::vector<torch::Tensor>& tensors);
// "'name' has 12 NaN and 0 infinite values" for the first tensor that is not finite; empty if none.
std::string describe_non_finite(const std::vector<std::pair<std::string, torch::Tensor>>& named);

// For eval and generate: weights that are not finite would print a NaN loss or garbage text; a
// runtime error names the tensor and the folder instead.
void require_finite_weights(const std::vector<std::pair<std::string, torch::Tensor>>& named, const std::string& dir);

}  // namespace xtrain::train
