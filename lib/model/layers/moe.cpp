#include "model/layers/moe.h"

#include <cmath>
#include <limits>
#include <numeric>

#include <torch/torch.h>

#include "model/kernels/fp16_emulation.h"
#include "model/kernels/fused_swiglu.h"
#include "model/layers/parameter_source.h"
#include "model/kernels/widened_gemm.h"

namespace xtrain::model {
namespace {

// A module that only holds parameters, for HF's names (gate.weight, experts.gate_up_proj).
struct ParameterHolder : torch::nn::Module {};

}  // namespace

MoeBlockImpl::MoeBlockImpl(const MoeOptions& options) : MoeBlockImpl(options, ExpertLayout{}) {}

MoeBlockImpl::MoeBlockImpl(const MoeOptions& options, const ExpertLayout& layout)
    : options_(options), tp_experts_(options.num_experts) {
  const int64_t e = options.num_experts, h = options.hidden_size, i = options.intermediate_size;
  TORCH_CHECK(options.n_group >= 1 && e % options.n_group == 0 && options.topk_group <= options.n_group &&
                  (options.n_group == 1 || e / options.n_group >= 2) &&
                  options.top_k <= options.topk_group * (e / options.n_group),
              "MoE groups: ", e, " experts in ", options.n_group, " groups, ", options.topk_group,
              " chosen, cannot offer top_k ", options.top_k);
  const bool biased = layout.biased, transposed = layout.transposed;
  auto gate = register_module(layout.router, std::make_shared<ParameterHolder>());
  gate_weight = gate->register_parameter("weight", unmaterialized({e, h}));
  if (biased) router_bias = gate->register_parameter("bias", unmaterialized({e}));
  if (options.router == Router::sigmoid_bias)
    expert_bias = gate->register_buffer("e_score_correction_bias", torch::zeros({e}));
  auto experts = register_module("experts", std::make_shared<ParameterHolder>());
  gate_up_proj = experts->register_parameter("gate_up_proj", unmaterialized(transposed ? std::vector<int64_t>{e, h, 2 * i}
                                                                                     : std::vector<int64_t>{e, 2 * i, h}));
  if (biased) gate_up_bias = experts->register_parameter("gate_up_proj_bias", unmaterialized({e, 2 * i}));
  down_proj = experts->register_parameter("down_proj", unmaterialized(transposed ? std::vector<int64_t>{e, i, h}
                                                                               : std::vector<int64_t>{e, h, i}));
  if (biased) down_bias = experts->register_parameter("down_proj_bias", unmaterialized({e, h}));
  if (options.num_shared_experts > 0)
    shared_experts = register_module("shared_experts", SwiGLU(h, i * options.num_shared_experts));
  if (options.shared_expert_gate) shared_expert_gate = register_module("shared_expert_gate", Linear(h, 1, false));
}

torch::Tensor MoeBlockImpl::group_limited(const torch::Tensor& choice) const {
  const int64_t tokens = choice.size(0), groups = options_.n_group;
  const auto grouped = choice.view({tokens, groups, -1});
  const auto group_scores = std::get<0>(grouped.topk(2, -1)).sum(-1);  // [T, G]
  const auto chosen = std::get<1>(group_scores.topk(options_.topk_group, -1));
  const auto allowed = torch::zeros_like(group_scores, torch::kBool).scatter(1, chosen, true);
  return choice.masked_fill(~allowed.unsqueeze(-1).expand_as(grouped).reshape_as(choice),
                            -std::numeric_limits<float>::infinity());
}

std::vector<std::pair<std::string, torch::Tensor>> MoeBlockImpl::expert_weights() const {
  std::vector<std::pair<std::string, torch::Tensor>> weights = {{"experts.gate_up_proj", gate_up_proj},
                                                                {"experts.down_proj", down_proj}};
  if (gate_up_bias.defined()) weights.emplace_back("experts.gate_up_proj_bias", gate_up_bias);
  if (down_bias.defined()) weights.emplace_back("experts.down_proj_bias", down_bias);
  return weights;
}

Routing MoeBlockImpl::route(const torch::Tensor& tokens) const {
  Routing r;
  r.logits = torch::nn::functional::linear(tokens.to(torch::kFloat32), gate_weight.to(torch::kFloat32),
                                           router_bias.defined() ? router_bias.to(torch::kFloat32) : torch::Tensor());
  choose(r);
  if (options_.routed_scaling_factor != 1.0) r.weights = r.weights * options_.routed_scaling_factor;
  return r;
}

void MoeBlockImpl::choose(Routing& r) const {
  if (options_.router == Router::softmax) {
    r.probs = torch::softmax(r.logits, -1);
    auto [top, experts] = r.probs.topk(options_.top_k, -1);
    r.weights = options_.norm_topk_prob ? top / top.sum(-1, /*keepdim=*/true) : top;
    r.experts = experts;
  } else {
    const auto scores = r.logits.sigmoid();
    auto choice = scores.detach() + expert_bias;
    if (options_.n_group > 1) choice = group_limited(choice);
    r.experts = std::get<1>(choice.topk(options_.top_k, -1));
    r.weights = scores.gather(1, r.experts);
    if (options_.norm_topk_prob) r.weights = r.weights / (r.weights.sum(-1, /*keepdim=*/true) + 1e-20);
    r.probs = scores / scores.sum(-1, /*keepdim=*/true);
  }
}

// Every (token, choice) pair within capacity is computed (all of them when dropless). The pairs
// are sorted by expert (stably, so tokens keep their order within an expert), each expert's run
// goes through its two matmuls, and the outputs, weighed, are added back to their tokens.
torch::Tensor MoeBlockImpl::run_experts(const torch::Tensor& tokens, Routing& routing,
                                        const std::function<void()>& between) const {
  const int64_t k = options_.top_k;
  const auto flat = routing.experts.reshape(-1);
  auto order = std::get<1>(flat.sort(/*stable=*/std::optional<bool>(true), /*dim=*/0));
  const auto counted = torch::bincount(flat, {}, options_.num_experts).to(torch::kCPU);
  std::vector<int64_t> counts(counted.data_ptr<int64_t>(), counted.data_ptr<int64_t>() + counted.numel());
  if (options_.capacity_factor > 0) {
    const auto kept = within_capacity(order, routing.weights.reshape(-1).index_select(0, order), counts, tokens.size(0));
    routing.dropped = order.numel() - kept.numel();
    order = order.index_select(0, kept);
  }
  if (tp_experts_ < options_.num_experts) {  // this tp rank's experts' rows: a range of `order`
    const auto before = std::accumulate(counts.begin(), counts.begin() + tp_first_expert_, int64_t{0});
    counts = tp_counts(counts);
    order = order.narrow(0, before, std::accumulate(counts.begin(), counts.end(), int64_t{0}));
  }
  torch::Tensor outputs;
  // The same on every rank, whatever its tokens: each part is an exchange all of them join.
  const int64_t parts = dispatcher_ ? dispatcher_->micro_batches() : 1;
  if (parts > 1) {
    outputs = exchange_in_parts(tokens, order, flat, parts, between);
  } else {
    const auto sorted = tokens.index_select(0, order.div(k, "floor"));
    if (dispatcher_) {
      auto dispatched = dispatcher_->dispatch(sorted, counts);
      dispatcher_->start_combine(compute_experts(dispatched.rows, dispatched.local_counts), dispatched);
      between();
      outputs = dispatcher_->finish_combine(dispatched);
    } else {
      outputs = compute_experts(sorted, counts);
      between();
    }
  }
  const auto token_of = order.div(k, "floor");
  const auto weights = routing.weights.reshape(-1).index_select(0, order).unsqueeze(-1).to(tokens.scalar_type());
  return torch::zeros_like(tokens).index_add(0, token_of, outputs * weights);
}

// Part p holds the choices of tokens [p T / parts, (p + 1) T / parts), still sorted by expert.
// Every rank runs the same sequence of exchanges (every part, even an empty one).
torch::Tensor MoeBlockImpl::exchange_in_parts(const torch::Tensor& tokens, torch::Tensor& order,
                                              const torch::Tensor& flat, int64_t parts,
                                              const std::function<void()>& between) const {
  const int64_t k = options_.top_k, count = tokens.size(0);
  const auto token_of = order.div(k, "floor");
  std::vector<torch::Tensor> part_orders;
  std::vector<TokenDispatcher::Dispatched> dispatched;
  auto start = [&](int64_t p) {
    const int64_t first = p * count / parts, last = (p + 1) * count / parts;
    const auto part = order.masked_select(token_of.ge(first).logical_and(token_of.lt(last)));
    const auto counted = torch::bincount(flat.index_select(0, part), {}, options_.num_experts).to(torch::kCPU);
    const auto counts = tp_counts({counted.data_ptr<int64_t>(), counted.data_ptr<int64_t>() + counted.numel()});
    part_orders.push_back(part);
    dispatched.push_back(dispatcher_->start_dispatch(tokens.index_select(0, part.div(k, "floor")), counts));
  };
  start(0);
  for (int64_t p = 0; p < parts; ++p) {
    if (p + 1 < parts) start(p + 1);  // in flight while this part's experts compute
    auto& mine = dispatched[static_cast<size_t>(p)];
    dispatcher_->finish_dispatch(mine);
    dispatcher_->start_combine(compute_experts(mine.rows, mine.local_counts), mine);
  }
  between();
  std::vector<torch::Tensor> outputs;
  for (auto& part : dispatched) outputs.push_back(dispatcher_->finish_combine(part));
  order = torch::cat(part_orders);
  return torch::cat(outputs);
}

torch::Tensor MoeBlockImpl::within_capacity(const torch::Tensor& order, const torch::Tensor& sorted_weights,
                                            std::vector<int64_t>& counts, int64_t tokens) const {
  const auto capacity = static_cast<int64_t>(std::ceil(options_.capacity_factor * static_cast<double>(tokens) *
                                                       static_cast<double>(options_.top_k) /
                                                       static_cast<double>(options_.num_experts)));
  std::vector<torch::Tensor> kept;
  int64_t start = 0;
  for (auto& count : counts) {
    auto positions = torch::arange(start, start + count, order.options());
    if (count > capacity) {
      if (options_.drop_policy == DropPolicy::probs)  // the highest weights, then back in token order
        positions = std::get<0>(std::get<1>(sorted_weights.narrow(0, start, count).topk(capacity)).sort()) + start;
      else
        positions = positions.narrow(0, 0, capacity);
    }
    kept.push_back(positions);
    start += count;
    count = std::min(count, capacity);
  }
  return torch::cat(kept);
}

std::vector<int64_t> MoeBlockImpl::tp_counts(const std::vector<int64_t>& counts) const {
  const auto first = counts.begin() + tp_first_expert_;
  return {first, first + tp_experts_};
}

// Every held expert runs, even on no rows, so that the outputs stay in the autograd graph of
// the rows (a dispatcher's backward must run on every rank).
torch::Tensor MoeBlockImpl::compute_experts(const torch::Tensor& rows, const std::vector<int64_t>& counts) const {
  TORCH_CHECK(static_cast<int64_t>(counts.size()) == gate_up_proj.size(0), "MoE block: ", counts.size(),
              " expert counts for ", gate_up_proj.size(0), " experts held");
  // Each expert's matrices as views taken at once: the backward of one view a call (weight[e])
  // zero-fills a whole stacked gradient for every expert and adds them up; unbind's writes one.
  const ExpertMatrices matrices{gate_up_proj.unbind(0), down_proj.unbind(0)};
  std::vector<torch::Tensor> outputs;
  int64_t offset = 0;
  for (size_t e = 0; e < counts.size(); ++e) {
    const auto segment = rows.narrow(0, offset, counts[e]);
    outputs.push_back(expert(segment, matrices, static_cast<int64_t>(e)));
    offset += counts[e];
  }
  return torch::cat(outputs);
}

torch::Tensor MoeBlockImpl::expert(const torch::Tensor& rows, const ExpertMatrices& matrices, int64_t expert) const {
  const auto e = static_cast<size_t>(expert);
  const auto gate_up = expert_product(rows, gate_up_proj, matrices.gate_up[e], expert, false).chunk(2, -1);
  const auto gated = fused && fused_swiglu_applies(gate_up[0], gate_up[1]) ? fused_swiglu(gate_up[0], gate_up[1])
                                                                           : torch::silu(gate_up[0]) * gate_up[1];
  return expert_product(gated, down_proj, matrices.down[e], expert, false);
}

torch::Tensor MoeBlockImpl::expert_product(const torch::Tensor& rows, const torch::Tensor& weight,
                                           const torch::Tensor& matrix, int64_t expert, bool transposed) const {
  if (!float8) return transposed ? widened_matmul(rows, matrix) : widened_linear(rows, matrix, {});
  auto scales = gathered_float8_scales(weight);
  if (scales.defined()) scales = transposed ? scales[expert].t() : scales[expert];
  return float8_linear(rows, transposed ? matrix.t() : matrix, {}, *float8, scales);
}

// Under tensor parallelism the router sees the whole sequence as whole() gives it (its gradient
// is the same on every rank), the experts as enter() gives it (their input gradients are partial
// sums), and the routed outputs, partial over the ranks' experts, leave() summed.
torch::Tensor MoeBlockImpl::forward(const torch::Tensor& x, Routing* routing) {
  const auto& tp = tensor_parallel_;
  const auto experts_input = tp ? tp->enter(x) : x;
  const auto tokens = experts_input.reshape({-1, options_.hidden_size});
  auto r = route(tp ? tp->whole(x).reshape({-1, options_.hidden_size}) : tokens);
  if (tp) r.weights = tp->shared(r.weights);
  torch::Tensor shared;
  auto out = run_experts(tokens, r, [&] {
               if (shared_experts) shared = shared_experts(x);
             }).view(experts_input.sizes());
  if (tp) out = tp->leave(out);
  if (shared_experts) out = out + (shared_expert_gate ? torch::sigmoid(gate_of_shared(x)) * shared : shared);
  if (routing) *routing = std::move(r);
  return out;
}

// With sequence parallelism x is this rank's part of the sequence: the replicated gate's
// gradient is partial.
torch::Tensor MoeBlockImpl::gate_of_shared(const torch::Tensor& x) const {
  const auto& tp = tensor_parallel_;
  const auto& weight = shared_expert_gate->weight;
  return project(x, tp && tp->sequence_parallel() ? tp->shared(weight) : weight, {});
}

void MoeBlockImpl::set_fused_kernels(bool on) {
  fused = on;
  if (shared_experts) shared_experts->set_fused_kernels(on);
}

void MoeBlockImpl::use_tensor_parallel(std::shared_ptr<TensorParallelOps> ops) {
  const int64_t experts = options_.num_experts, ranks = ops->size();
  TORCH_CHECK(experts % ranks == 0 && gate_up_proj.size(0) == experts / ranks, "MoE block under tensor parallelism: ",
              gate_up_proj.size(0), " experts held of ", experts, " over ", ranks, " ranks");
  tp_experts_ = experts / ranks;
  tp_first_expert_ = ops->rank() * tp_experts_;
  if (shared_experts) shared_experts->tensor_parallel = ops;
  tensor_parallel_ = std::move(ops);
}

void MoeBlockImpl::describe_init(const std::string& name, double std, double output_std, InitPlan& plan) const {
  describe_router(name, std, plan);
  plan[name + ".experts.gate_up_proj"] = {ParameterInit::Kind::normal, std};
  plan[name + ".experts.down_proj"] = {ParameterInit::Kind::normal, output_std};
  if (shared_experts) shared_experts->describe_init(name + ".shared_experts", std, output_std, plan);
  if (shared_expert_gate) shared_expert_gate->describe_init(name + ".shared_expert_gate", std, plan);
}

void MoeBlockImpl::describe_router(const std::string& name, double std, InitPlan& plan) const {
  plan[name + ".gate.weight"] = {ParameterInit::Kind::normal, std};
}

void MoeBlockImpl::update_expert_bias(const torch::Tensor& load, double rate) {
  TORCH_CHECK(expert_bias.defined(), "update_expert_bias: the softmax router has no expert bias");
  torch::NoGradGuard no_grad;
  const auto wide = load.to(torch::kFloat32);
  expert_bias.add_((wide.mean() - wide).sign() * rate);
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
  stats.dropped = static_cast<double>(routing.dropped);
  return stats;
}

torch::Tensor load_balancing_loss(const RoutingStats& stats, int64_t top_k) {
  const double experts = static_cast<double>(stats.counts.numel());
  return (stats.counts * stats.prob_sums).sum() * (experts / (static_cast<double>(top_k) * stats.tokens * stats.tokens));
}

torch::Tensor router_z_loss(const RoutingStats& stats) { return stats.z_sum / stats.tokens; }

void MoeBlockImpl::float8_layers(const std::string& name, Float8Layers& layers) {
  layers.experts.emplace_back(name, this);
  if (shared_experts) shared_experts->float8_layers(module_name(name, "shared_experts"), layers);
}

}  // namespace xtrain::model
