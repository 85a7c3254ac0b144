// AdamW (Loshchilov & Hutter 2019) over named parameters, with the update written exactly as
// torch.optim.AdamW's single-tensor path (computed with multi-tensor foreach ops), so xtrain and
// the PyTorch reference agree to rounding. Weight decay is decoupled and applied only to parameters marked `decay`.
// State (exp_avg, exp_avg_sq per parameter and the step count) is exposed as named tensors
// for checkpoints. A frozen parameter (model.freeze) is never updated and holds no state; its
// entries in state() are zeros made on demand, so that checkpoints keep one layout.
#pragma once
#include <map>
#include <string>
#include <vector>

#include <torch/types.h>

namespace xtrain::optim {

struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.0;
  // Each parameter updated in one pass (optim/fused_adamw.h) where the kernel applies
  // (memory.fused_kernels); the multi-tensor ops otherwise.
  bool fused = false;
};

struct NamedParameter {
  std::string name;
  torch::Tensor tensor;
  bool decay = true;
  bool frozen = false;
};

class AdamW {
 public:
  AdamW(std::vector<NamedParameter> parameters, AdamWOptions options);
  virtual ~AdamW() = default;

  // One update with learning rate lr from the parameters' current .grad().
  virtual void step(double lr);
  int64_t steps_taken() const { return step_; }
  // Figures the last step() measured, for metrics.jsonl by name (none for AdamW).
  virtual std::map<std::string, double> step_metrics() const { return {}; }

  // "exp_avg.<name>", "exp_avg_sq.<name>" and "step" (int64 scalar).
  virtual std::map<std::string, torch::Tensor> state() const;
  // Restores state(); a missing or mis-shaped entry is an InputError naming it.
  virtual void load_state(const std::map<std::string, torch::Tensor>& state);

  // State that differs from rank to rank (none for AdamW; 1-bit Adam's error feedback), which a
  // checkpoint keeps in a file per rank; `where` names that file in errors.
  virtual std::map<std::string, torch::Tensor> rank_state() const { return {}; }
  virtual void load_rank_state(const std::map<std::string, torch::Tensor>& /*state*/, const std::string& /*where*/) {}
  // For a checkpoint saved under another layout, whose per-rank files belong to other shards:
  // `state` is its first rank's. Returns a notice of what was not carried over (empty: nothing
  // was lost), or throws an InputError when the run cannot resume on this layout.
  virtual std::string restart_rank_state(const std::map<std::string, torch::Tensor>& /*state*/,
                                         const std::string& /*where*/) {
    return {};
  }

 protected:
  struct Slot {
    NamedParameter parameter;
    torch::Tensor exp_avg;
    torch::Tensor exp_avg_sq;
  };
  std::vector<Slot> slots_;
  AdamWOptions options_;
  int64_t step_ = 0;
};

}  // namespace xtrain::optim
