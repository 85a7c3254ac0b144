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

std::vector<std::vector<double>> RankSums::gather(const std::vector<double>& mine) {
  const int64_t size = world_->size(), figures = static_cast<int64_t>(mine.size());
  if (size == 1 || figures == 0) return std::vector<std::vector<double>>(static_cast<size_t>(size), mine);
  // Each rank writes its own row and zeros elsewhere: the sum is every rank's row.
  auto host = torch::zeros({size, figures}, torch::kFloat64);
  host[world_->rank()].copy_(torch::tensor(mine, torch::kFloat64));
  auto values = host.to(device_);
  world_->all_reduce_sum(values).wait();
  values = values.to(torch::kCPU).contiguous();
  std::vector<std::vector<double>> rows;
  for (int64_t r = 0; r < size; ++r) {
    const auto* row = values[r].data_ptr<double>();
    rows.emplace_back(row, row + figures);
  }
  return rows;
}

std::pair<double, RankSpread> RankSums::sum_and_spread(double summed, double per_rank) {
  auto [sum, spreads] = sum_and_spreads(summed, {per_rank});
  return {sum, spreads.front()};
}

std::pair<double, std::vector<RankSpread>> RankSums::sum_and_spreads(double summed,
                                                                     const std::vector<double>& per_rank) {
  const int64_t size = world_->size();
  const auto figures = static_cast<int64_t>(per_rank.size());
  if (size == 1) {
    std::vector<RankSpread> spreads;
    for (const double value : per_rank) spreads.push_back({value, value, 0});
    return {summed, spreads};
  }
  // [summed, figure 0 of every rank, figure 1 of every rank, ...]
  auto host = torch::zeros({1 + figures * size}, torch::kFloat64);
  host[0] = summed;
  for (int64_t f = 0; f < figures; ++f) host[1 + f * size + world_->rank()] = per_rank[static_cast<size_t>(f)];
  auto values = host.to(device_);
  world_->all_reduce_sum(values).wait();
  values = values.to(torch::kCPU);
  std::vector<RankSpread> spreads;
  for (int64_t f = 0; f < figures; ++f) {
    const auto ranks = values.narrow(0, 1 + f * size, size);
    spreads.push_back({ranks.mean().item<double>(), ranks.max().item<double>(), ranks.argmax().item<int64_t>()});
  }
  return {values[0].item<double>(), spreads};
}

}  // namespace xtrain::train
