// A mixture-of-experts feed-forward block, dropless: a router picks top_k of num_experts SwiGLU
// experts for every token, the tokens are sorted by expert and each expert's segment computed
// with one matmul pair, then the outputs are weighed by the router and summed back per token.
// Layout and names are transformers 5's Qwen3-MoE block: the router is `gate` (weight [E, H]),
// the experts' weights are stacked, `experts.gate_up_proj` [E, 2I, H] (gate rows first) and
// `experts.down_proj` [E, H, I].
//
// The router runs in fp32 whatever the compute dtype. The block returns its routing statistics
// beside its output; the auxiliary losses are computed from them (over one layer here, over a
// model's layers or a global batch by whoever sums the statistics first):
//   load balancing (Switch, Megatron's normalisation): E / (k T^2) * sum_e count_e * P_e, where
//     count_e is the number of the T tokens routed to e and P_e the sum of their router
//     probabilities of e; 1 when balanced. (transformers' load_balancing_loss_func is k times it.)
//   z-loss: mean over tokens of logsumexp(logits)^2.
#pragma once
#include <cstdint>
#include <string>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "model/parameter_init.h"

namespace xtrain::model {

struct MoeOptions {
  int64_t hidden_size = 0;
  int64_t num_experts = 0;
  int64_t top_k = 0;
  int64_t intermediate_size = 0;  // of each expert
  bool norm_topk_prob = true;     // renormalise the top-k weights to sum to 1
};

struct Routing {
  torch::Tensor logits;   // fp32 [T, E]
  torch::Tensor probs;    // fp32 [T, E], softmax of logits
  torch::Tensor weights;  // fp32 [T, k], the chosen experts' weights
  torch::Tensor experts;  // int64 [T, k], the chosen experts
};

// What the losses need of a layer's routing; sums, so that layers and ranks add up.
struct RoutingStats {
  torch::Tensor counts;      // fp32 [E]: tokens routed to each expert
  torch::Tensor prob_sums;   // fp32 [E]: each expert's router probabilities, summed over tokens
  torch::Tensor z_sum;       // fp32 scalar: sum over tokens of logsumexp(logits)^2
  double tokens = 0;
};

RoutingStats routing_stats(const Routing& routing);
torch::Tensor load_balancing_loss(const RoutingStats& stats, int64_t top_k);
torch::Tensor router_z_loss(const RoutingStats& stats);

class MoeBlockImpl : public torch::nn::Module {
 public:
  explicit MoeBlockImpl(const MoeOptions& options);
  // x: [..., H] -> [..., H]; the routing of its tokens (flattened) in `routing` when not null.
  torch::Tensor forward(const torch::Tensor& x, Routing* routing = nullptr);
  Routing route(const torch::Tensor& tokens) const;  // tokens: [T, H]
  // Router and experts ~ N(0, std^2), except down_proj, which writes into the residual stream.
  void describe_init(const std::string& name, double std, double output_std, InitPlan& plan) const;

  torch::Tensor gate_weight;           // [E, H], registered as gate.weight
  torch::Tensor gate_up_proj, down_proj;  // registered under experts.

 private:
  torch::Tensor run_experts(const torch::Tensor& tokens, const Routing& routing) const;
  MoeOptions options_;
};
TORCH_MODULE(MoeBlock);

}  // namespace xtrain::model
