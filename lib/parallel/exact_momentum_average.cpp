#include "parallel/exact_momentum_average.h"

#include <torch/torch.h>

namespace xtrain::parallel {

void ExactMomentumAverage::average(const std::vector<torch::Tensor>& tensors) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> flat;
  flat.reserve(tensors.size());
  for (const auto& t : tensors) flat.push_back(t.reshape({-1}));
  auto all = torch::cat(flat);
  comm_->all_reduce_sum(all).wait();
  all.div_(static_cast<double>(comm_->size()));
  int64_t at = 0;
  for (const auto& t : tensors) {
    t.copy_(all.narrow(0, at, t.numel()).view_as(t));
    at += t.numel();
  }
}

}  // namespace xtrain::parallel
