// The momentum exchange of 1-bit Adam without the compression: every rank's momenta averaged by
// one fp32 all-reduce, no error feedback. With it, 1-bit Adam is Adam with its variance frozen at
// optim.freeze_step and the replicas' momenta (not gradients) averaged, which separates what the
// frozen variance does to convergence from what the 1-bit compression does. It moves as many
// bytes as AdamW's gradient all-reduce: an ablation, chosen by XTRAIN_ONEBIT_EXCHANGE=exact
// (train/training_run.cpp), not a way to train.
#pragma once
#include <memory>

#include "optim/momentum_exchange.h"
#include "parallel/comm.h"

namespace xtrain::parallel {

class ExactMomentumAverage final : public optim::MomentumExchange {
 public:
  explicit ExactMomentumAverage(std::shared_ptr<Comm> comm) : comm_(std::move(comm)) {}

  int64_t replicas() const override { return comm_->size(); }
  int64_t replica_rank() const override { return comm_->rank(); }
  void average(const std::vector<torch::Tensor>& tensors) override;
  std::map<std::string, torch::Tensor> state() const override { return {}; }
  void load_state(const std::map<std::string, torch::Tensor>&) override {}

 private:
  std::shared_ptr<Comm> comm_;
};

}  // namespace xtrain::parallel
