#include "train/expert_balance.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include "util/input_error.h"

namespace xtrain::train {

ExpertBalance::ExpertBalance(model::CausalLM& model, double rate)
    : rate_(rate) {
  std::vector<int64_t> moe_layers;  // the model's MoE blocks come in layer order, prediction depths last
  const auto& c = model.config();
  for (int64_t layer = 0; layer < c.num_layers + c.mtp_layers; ++layer)
    if (c.is_moe_layer(layer)) moe_layers.push_back(layer);
  for (const auto& [name, block] : model.moe_blocks())
    blocks_.push_back({name + ".gate.e_score_correction_bias", moe_layers.at(blocks_.size()), block});
}

ExpertBalanceStats ExpertBalance::finish_step(const torch::Tensor& loads, const torch::Tensor& dropped,
                                              parallel::Comm& data_ranks) {
  // One collective for both, in float64 so that counts of any size add exactly.
  auto summed = torch::cat({loads.reshape(-1), dropped.reshape(-1)}).to(torch::kFloat64);
  data_ranks.all_reduce_sum(summed).wait();
  summed = summed.to(torch::kCPU);
  const int64_t layers = loads.size(0), experts = loads.size(1);
  TORCH_CHECK(layers == static_cast<int64_t>(blocks_.size()), "expert loads of ", layers, " layers for ",
              blocks_.size(), " MoE blocks");
  const auto global_loads = summed.narrow(0, 0, layers * experts).view({layers, experts});
  const auto global_dropped = summed.narrow(0, layers * experts, layers);
  ExpertBalanceStats stats;
  for (int64_t i = 0; i < layers; ++i) {
    const auto load = global_loads[i];
    const double mean = load.mean().item<double>();
    const double ratio = mean > 0 ? load.max().item<double>() / mean : 1.0;
    stats.load_ratio.push_back(ratio);
    if (ratio > stats.worst_ratio) {
      stats.worst_ratio = ratio;
      stats.worst_layer = blocks_[i].layer;
    }
    auto& block = *blocks_[i].block;
    if (block.expert_bias.defined()) {
      if (rate_ > 0) block.update_expert_bias(load.to(block.expert_bias.device()), rate_);
      const auto bias = block.expert_bias.to(torch::kCPU);
      const double low = bias.min().item<double>(), high = bias.max().item<double>();
      stats.bias_min = i == 0 ? low : std::min(stats.bias_min, low);
      stats.bias_max = i == 0 ? high : std::max(stats.bias_max, high);
    }
  }
  const double choices = global_loads.sum().item<double>();
  stats.dropped_fraction = choices > 0 ? global_dropped.sum().item<double>() / choices : 0.0;
  return stats;
}

nlohmann::json ExpertBalance::state() const {
  nlohmann::json state = nlohmann::json::object();
  for (const auto& b : blocks_) {
    if (!b.block->expert_bias.defined()) continue;
    const auto bias = b.block->expert_bias.to(torch::kCPU).contiguous();
    state[b.name] = std::vector<float>(bias.data_ptr<float>(), bias.data_ptr<float>() + bias.numel());
  }
  return state;
}

void ExpertBalance::load_state(const nlohmann::json& state, const std::string& source) {
  size_t expected = 0;
  for (const auto& b : blocks_) {
    if (!b.block->expert_bias.defined()) continue;
    ++expected;
    const auto values = state.contains(b.name) ? state.at(b.name).get<std::vector<float>>() : std::vector<float>{};
    if (static_cast<int64_t>(values.size()) != b.block->expert_bias.numel())
      throw InputError(fmt::format("{}: expert_bias has {} values for {}, the model needs {}", source, values.size(),
                                   b.name, b.block->expert_bias.numel()));
    torch::NoGradGuard no_grad;
    b.block->expert_bias.copy_(torch::tensor(values, torch::kFloat32));
  }
  if (state.size() != expected)
    throw InputError(fmt::format("{}: expert_bias holds {} layers' biases, the model has {}", source, state.size(),
                                 expected));
}

}  // namespace xtrain::train
