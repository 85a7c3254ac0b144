// The experts' side of a training step. The loads of every MoE layer (tokens routed to each
// expert), summed over the step's micro batches and then over the data ranks, move the
// sigmoid_bias router's expert bias (model/layers/moe.h: once per step, toward balance) and give the
// balance metrics: each layer's max/mean expert load, the worst layer, the fraction of choices
// dropped over capacity, and the bias range. Because the loads are sums over the global batch,
// the bias is the same on every rank and in every layout.
//
// The biases are part of the training state: state() and load_state() carry them through
// trainer_state.json, as exact float values.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "model/causal_lm.h"
#include "model/layers/moe.h"
#include "parallel/comm.h"

namespace xtrain::train {

struct ExpertBalanceStats {
  std::vector<double> load_ratio;  // per MoE layer: max / mean expert load
  int64_t worst_layer = -1;        // the index in the model's layers of the highest ratio
  double worst_ratio = 0;
  double dropped_fraction = 0;     // of the step's (token, expert) choices
  double bias_min = 0, bias_max = 0;  // over every layer's expert bias (sigmoid_bias)
};

class ExpertBalance {
 public:
  // rate: model.router_bias_update_rate (used by the sigmoid_bias router only).
  ExpertBalance(model::CausalLM& model, double rate);
  bool active() const { return !blocks_.empty(); }

  // loads [L, E] and dropped [L], summed over this rank's micro batches; data_ranks: the group
  // over which the global batch is split. Updates the biases and returns the step's figures.
  ExpertBalanceStats finish_step(const torch::Tensor& loads, const torch::Tensor& dropped, parallel::Comm& data_ranks);

  nlohmann::json state() const;  // {"model.layers.1.mlp.gate.e_score_correction_bias": [floats], ...}
  // A state of another model (other layers or experts) is an error naming `source`.
  void load_state(const nlohmann::json& state, const std::string& source);

 private:
  struct Block {
    std::string name;  // of the bias buffer
    int64_t layer;     // index in the model's layers
    model::MoeBlockImpl* block;
  };
  std::vector<Block> blocks_;
  double rate_;
};

}  // namespace xtrain::train
