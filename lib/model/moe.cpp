#include "model/moe.h"

#include <torch/torch.h>

#include "model/parameter_source.h"

namespace xtrain::model {
namespace {

// A module that only holds parameters, for HF's names (gate.weight, experts.gate_up_proj).
struct ParameterHolder : torch::nn::Module {};

}  // namespace

MoeBlockImpl::MoeBlockImpl(const MoeOptions& options) : options_(options) {
  const int64_t e = options.num_experts, h = options.hidden_size, i = options.intermediate_size;
  auto gate = register_module("gate", std::make_shared<ParameterHolder>());
  gate_weight = gate->register_parameter("weight", unmaterialized({e, h}));
  auto experts = register_module("experts", std::make_shared<ParameterHolder>());
  gate_up_proj = experts->register_parameter("gate_up_proj", unmaterialized({e, 2 * i, h}));
  down_proj = experts->register_parameter("down_proj", unmaterialized({e, h, i}));
}

Routing MoeBlockImpl::route(const torch::Tensor& tokens) const {
  Routing r;
  r.logits = torch::nn::functional::linear(tokens.to(torch::kFloat32), gate_weight.to(torch::kFloat32));
  r.probs = torch::softmax(r.logits, -1);
  auto [top, experts] = r.probs.topk(options_.top_k, -1);
  r.weights = options_.norm_topk_prob ? top / top.sum(-1, /*keepdim=*/true) : top;
  r.experts = experts;
  return r;
}

// Dropless: every (token, choice) pair is computed. The pairs are sorted by expert (stably, so
// tokens keep their order within an expert), each expert's run goes through its two matmuls,
// and the outputs, weighed, are added back to their tokens.
torch::Tensor MoeBlockImpl::run_experts(const torch::Tensor& tokens, const Routing& routing) const {
  const int64_t k = options_.top_k;
  const auto flat = routing.experts.reshape(-1);
  const auto order = std::get<1>(flat.sort(/*stable=*/std::optional<bool>(true), /*dim=*/0));
  const auto token_of = order.div(k, "floor");
  const auto counts = torch::bincount(flat, {}, options_.num_experts).to(torch::kCPU);
  const auto sorted = tokens.index_select(0, token_of);
  std::vector<torch::Tensor> outputs;
  int64_t offset = 0;
  for (int64_t e = 0; e < options_.num_experts; ++e) {
    const int64_t count = counts[e].item<int64_t>();
    if (count == 0) continue;
    const auto segment = sorted.narrow(0, offset, count);
    const auto gate_up = torch::nn::functional::linear(segment, gate_up_proj[e]).chunk(2, -1);
    outputs.push_back(torch::nn::functional::linear(torch::silu(gate_up[0]) * gate_up[1], down_proj[e]));
    offset += count;
  }
  if (outputs.empty()) return torch::zeros_like(tokens);
  const auto weights = routing.weights.reshape(-1).index_select(0, order).unsqueeze(-1).to(tokens.scalar_type());
  return torch::zeros_like(tokens).index_add(0, token_of, torch::cat(outputs) * weights);
}

torch::Tensor MoeBlockImpl::forward(const torch::Tensor& x, Routing* routing) {
  const auto tokens = x.reshape({-1, options_.hidden_size});
  auto r = route(tokens);
  auto out = run_experts(tokens, r).view(x.sizes());
  if (routing) *routing = std::move(r);
  return out;
}

void MoeBlockImpl::describe_init(const std::string& name, double std, double output_std, InitPlan& plan) const {
  plan[name + ".gate.weight"] = {ParameterInit::Kind::normal, std};
  plan[name + ".experts.gate_up_proj"] = {ParameterInit::Kind::normal, std};
  plan[name + ".experts.down_proj"] = {ParameterInit::Kind::normal, output_std};
}

RoutingStats routing_stats(const Routing& routing) {
  RoutingStats stats;
  const int64_t experts = routing.probs.size(-1);
  stats.counts = torch::zeros({experts}, routing.probs.options())
                     .index_add(0, routing.experts.reshape(-1),
                                torch::ones({routing.experts.numel()}, routing.probs.options()));
  stats.prob_sums = routing.probs.sum(0);
  stats.z_sum = torch::logsumexp(routing.logits, -1).square().sum();
  stats.tokens = static_cast<double>(routing.probs.size(0));
  return stats;
}

torch::Tensor load_balancing_loss(const RoutingStats& stats, int64_t top_k) {
  const double experts = static_cast<double>(stats.counts.numel());
  return (stats.counts * stats.prob_sums).sum() * (experts / (static_cast<double>(top_k) * stats.tokens * stats.tokens));
}

torch::Tensor router_z_loss(const RoutingStats& stats) { return stats.z_sum / stats.tokens; }

}  // namespace xtrain::model
