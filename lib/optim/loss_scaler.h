// Dynamic loss scaling for fp16 training, with the rule of PyTorch's GradScaler. The loss is
// multiplied by scale() before backward so that small gradients survive fp16; unscale() divides
// them back and says whether any came out inf or NaN. Such a step must be skipped: update(false)
// then shrinks the scale by backoff_factor. After growth_interval finite steps in a row the scale
// grows by growth_factor, probing for the largest scale that does not overflow.
#pragma once
#include <cstdint>
#include <vector>

#include <torch/types.h>

namespace xtrain::optim {

struct LossScalerOptions {
  double initial_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

struct LossScalerState {
  double scale;
  int64_t finite_steps;  // finite steps since the last change of scale
};

class DynamicLossScaler {
 public:
  explicit DynamicLossScaler(LossScalerOptions options = {});

  double scale() const { return state_.scale; }

  // Divides every defined gradient of `parameters` by scale() in place. Returns true when all
  // of them are finite (after division: a gradient that overflowed stays inf).
  bool unscale(const std::vector<torch::Tensor>& parameters) const;

  // Records the outcome of a step: finite (the optimizer stepped) or not (it was skipped).
  void update(bool finite);

  LossScalerState state() const { return state_; }
  void load_state(const LossScalerState& state) { state_ = state; }

 private:
  LossScalerOptions options_;
  LossScalerState state_;
};

}  // namespace xtrain::optim
