#include "train/rank_sums.h"

#include <torch/torch.h>

namespace xtrain::train {

RankSums::RankSums(std::shared_ptr<parallel::Comm> world, torch::Device device)
    : world_(std::move(world)), device_(device) {}

double RankSums::sum(double value) {
  if (world_->size() == 1) return value;
  auto total = torch::tensor({value}, torch::kFloat64).to(device_);
  world_->all_reduce_sum(total).wait();
  return total.item<double>();
}

std::vector<double> RankSums::sum(std::vector<double> values) {
  if (world_->size() == 1 || values.empty()) return values;
  auto total = torch::tensor(values, torch::kFloat64).to(device_);
  world_->all_reduce_sum(total).wait();
  total = total.to(torch::kCPU);
  const auto* v = total.data_ptr<double>();
  return {v, v + values.size()};
}

std::pair<double, RankSpread> RankSums::sum_and_spread(double summed, double per_rank) {
  const int64_t size = world_->size();
  if (size == 1) return {summed, RankSpread{per_rank, per_rank, 0}};
  auto host = torch::zeros({size + 1}, torch::kFloat64);
  host[0] = summed;
  host[world_->rank() + 1] = per_rank;
  auto values = host.to(device_);
  world_->all_reduce_sum(values).wait();
  values = values.to(torch::kCPU);
  const auto ranks = values.narrow(0, 1, size);
  return {values[0].item<double>(),
          RankSpread{ranks.mean().item<double>(), ranks.max().item<double>(), ranks.argmax().item<int64_t>()}};
}

}  // namespace xtrain::train
