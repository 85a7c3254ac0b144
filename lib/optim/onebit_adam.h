// 1-bit Adam (Tang et al. 2021, "1-bit Adam: Communication Efficient Large-Scale Training with
// Adam's Convergence Speed"; DeepSpeed's OnebitAdam). Steps 1..freeze_step are exactly AdamW
// (optim/adamw.h) on gradients all-reduced over the replicas. After step freeze_step the variance
// and its bias correction stay as they were, the replicas stop all-reducing gradients
// (`set_compressing(true)`), each rank folds its own gradient into its momentum, and the momenta
// are averaged over the replicas by a 1-bit compressed exchange with error feedback
// (MomentumExchange). The update is AdamW's with the exchanged momentum and the frozen variance:
// p -= lr * (m / (1 - beta1^t)) / (sqrt(v) / sqrt(1 - beta2^freeze_step) + eps), after the decay.
// Unlike DeepSpeed, Adam's bias corrections are kept, so that the warm-up is AdamW's update.
// Checkpoints: AdamW's state, and per rank the error buffers (rank_state()).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "optim/adamw.h"
#include "optim/momentum_exchange.h"

namespace xtrain::optim {

class OnebitAdam final : public AdamW {
 public:
  // make_exchange: given the element count of each trained parameter (in order), the exchange
  // over the replicas. set_compressing: switches the model's replica all-reduce off (true) or on.
  using ExchangeFactory = std::function<std::unique_ptr<MomentumExchange>(const std::vector<int64_t>& sizes)>;
  OnebitAdam(std::vector<NamedParameter> parameters, AdamWOptions options, int64_t freeze_step,
             const ExchangeFactory& make_exchange, std::function<void(bool)> set_compressing);

  void step(double lr) override;
  void load_state(const std::map<std::string, torch::Tensor>& state) override;
  // "worker_error.<name>", "server_error.<name>", and "onebit.replicas", "onebit.replica_rank",
  // "onebit.compressing" (int64 scalars). load_rank_state is for the same layout; before the
  // freeze the errors are zeros on any layout and are not read.
  std::map<std::string, torch::Tensor> rank_state() const override;
  void load_rank_state(const std::map<std::string, torch::Tensor>& state, const std::string& where) override;
  // Another layout with the same number of replicas (DDP 2 -> HSDP 2 x 2): each rank's errors
  // belong to the saved layout's shards, so the errors start at zero, as DeepSpeed's 1-bit Adam
  // starts them on every resume; what is dropped is one exchange's compression residual. Another
  // number of replicas after the freeze is refused.
  std::string restart_rank_state(const std::map<std::string, torch::Tensor>& state, const std::string& where) override;

  bool compressing() const { return compressing_; }
  MomentumExchange& exchange() { return *exchange_; }

 private:
  void set_stage(bool compressing);
  std::vector<Slot*> trained();

  int64_t freeze_step_;
  std::unique_ptr<MomentumExchange> exchange_;
  std::function<void(bool)> set_compressing_;
  bool compressing_ = false;
};

// A warning when beta2 averages too few steps for its frozen variance to stand for the rest of
// the run (below 0.99: a window of under 100 steps), else empty. The paper and DeepSpeed use 0.999.
std::string onebit_adam_beta2_warning(double beta2);
// A warning when the freeze comes at or after the last step, so that the whole run is plain
// AdamW (nothing compressed), else empty.
std::string onebit_adam_freeze_warning(int64_t freeze_step, int64_t steps);

}  // namespace xtrain::optim
