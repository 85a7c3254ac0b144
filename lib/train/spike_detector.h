// Loss spikes (train.spike). A step is a spike when its loss or its gradient norm stands more
// than train.spike_zscore standard deviations above the mean over the last train.spike_window
// applied steps; detection starts once the window is full. The standard deviation is taken as
// at least 1% of the mean, so that a nearly flat window does not make noise a spike. What
// happens to a spike is the trainer's: `skip` applies no update (as for a non-finite step,
// XTuner's grad-norm skip), `rollback` reloads the last checkpoint and skips the data of the
// steps since it (Megatron's rerun idea: the data, not the weights, was bad).
#pragma once
#include <cstdint>
#include <deque>
#include <optional>
#include <string>

namespace xtrain::train {

struct Spike {
  std::string quantity;  // "loss" or "gradient norm"
  double value = 0, mean = 0, zscore = 0;
  int64_t window = 0;
  // "loss 9.12 is 14.3 standard deviations above the mean 2.31 of the last 50 steps"
  std::string describe() const;
};

class SpikeDetector {
 public:
  SpikeDetector(int64_t window, double zscore) : window_(window), zscore_(zscore) {}

  // The spike this step's values make, if any. Non-finite values are the guard's, not spikes.
  std::optional<Spike> check(double loss, double grad_norm) const;
  // An applied step's values join the window. After a rollback the window carries on: the steps
  // before it are as good a measure of the loss as any.
  void add(double loss, double grad_norm);

 private:
  std::optional<Spike> check_one(const std::deque<double>& history, double value, const char* quantity) const;

  int64_t window_;
  double zscore_;
  std::deque<double> losses_, grad_norms_;
};

}  // namespace xtrain::train
