// A mixture-of-experts feed-forward block, dropless: a router picks top_k of num_experts SwiGLU
// experts for every token, the tokens are sorted by expert and each expert's segment computed
// with one matmul pair, then the outputs are weighed by the router and summed back per token.
// Layout and names are transformers 5's (Qwen3-MoE, DeepSeek-V3): the router is `gate` (weight
// [E, H], and with the sigmoid router the buffer `e_score_correction_bias` [E]), the experts'
// weights are stacked, `experts.gate_up_proj` [E, 2I, H] (gate rows first) and
// `experts.down_proj` [E, H, I], and shared experts are one SwiGLU `shared_experts` of
// intermediate size I x num_shared_experts, optionally gated by sigmoid(`shared_expert_gate`(x))
// as in Qwen2-MoE.
//
// Routers, in fp32 whatever the compute dtype:
//   softmax       softmax over the logits; top_k of the probabilities, renormalised when
//                 norm_topk_prob (Qwen3-MoE, Mixtral);
//   sigmoid_bias  sigmoid scores; the experts are chosen by score + expert bias but weighed by
//                 the score alone (DeepSeek-V3's auxiliary-loss-free balancing); with n_group > 1
//                 only the topk_group groups with the highest sums of their two best
//                 (biased) scores are eligible; renormalised when norm_topk_prob.
// Either way the weights are then multiplied by routed_scaling_factor. The block returns its routing statistics
// beside its output; the auxiliary losses are computed from them (over one layer here, over a
// model's layers or a global batch by whoever sums the statistics first):
//   load balancing (Switch, Megatron's normalisation): E / (k T^2) * sum_e count_e * P_e, where
//     count_e is the number of the T tokens routed to e and P_e the sum of their router
//     probabilities of e; 1 when balanced. (transformers' load_balancing_loss_func is k times it.)
//   z-loss: mean over tokens of logsumexp(logits)^2.
//
// Under tensor parallelism (use_tensor_parallel) the experts split over the tp ranks by expert,
// rank r holding [r E / tp, (r + 1) E / tp) (Megatron's MoE parallel folding with expert tensor
// parallelism 1, its all-gather dispatcher): every rank routes every token of the sequence with
// the replicated router, so that the routing is one process's, computes its experts' rows and
// weighs them, and TensorParallelOps::leave sums the ranks' outputs (reduce-scatters them with
// sequence parallelism, where the tokens were gathered first). The routing weights' gradient on a
// rank covers its experts' rows only: TensorParallelOps::shared sums it. Shared experts split by
// their intermediate dimension as a dense MLP does. Expert parallelism then splits a rank's
// experts further over ep.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "model/layers/float8_user.h"
#include "model/layers/fused_kernel_user.h"
#include "model/layers/linear.h"
#include "model/spec/moe_choices.h"
#include "model/layers/parameter_init.h"
#include "model/layers/swiglu.h"

namespace xtrain::model {

struct MoeOptions {
  int64_t hidden_size = 0;
  int64_t num_experts = 0;
  int64_t top_k = 0;
  int64_t intermediate_size = 0;  // of each expert
  bool norm_topk_prob = true;     // renormalise the top-k weights to sum to 1
  Router router = Router::softmax;
  int64_t n_group = 1, topk_group = 1;  // group-limited routing (sigmoid_bias)
  double routed_scaling_factor = 1.0;
  int64_t num_shared_experts = 0;
  bool shared_expert_gate = false;
  // 0: dropless. Otherwise each expert computes at most ceil(capacity_factor * T * k / E) of the
  // T tokens of a forward, chosen by drop_policy: the highest router weights (probs) or the
  // first tokens (position); a dropped choice adds nothing, so a token whose every choice is
  // dropped passes through the residual alone.
  double capacity_factor = 0.0;
  DropPolicy drop_policy = DropPolicy::probs;
};

struct Routing {
  torch::Tensor logits;   // fp32 [T, E]
  torch::Tensor probs;    // fp32 [T, E]: the softmax, or the sigmoid scores normalised per token
  torch::Tensor weights;  // fp32 [T, k], the chosen experts' weights
  torch::Tensor experts;  // int64 [T, k], the chosen experts
  int64_t dropped = 0;    // (token, expert) choices over capacity, not computed
};

// What the losses need of a layer's routing; sums, so that layers and ranks add up.
struct RoutingStats {
  torch::Tensor counts;      // fp32 [E]: tokens routed to each expert
  torch::Tensor prob_sums;   // fp32 [E]: each expert's router probabilities, summed over tokens
  torch::Tensor z_sum;       // fp32 scalar: sum over tokens of logsumexp(logits)^2
  double tokens = 0;
  double dropped = 0;        // choices over capacity
};

RoutingStats routing_stats(const Routing& routing);
torch::Tensor load_balancing_loss(const RoutingStats& stats, int64_t top_k);
torch::Tensor router_z_loss(const RoutingStats& stats);

// How the (token, expert) rows, sorted by expert, reach the experts and come back. Without one
// the block computes every expert itself; expert parallelism (parallel/expert_dispatch.h)
// installs one that sends the rows to the ranks holding their experts and gathers the outputs
// back, and the block then holds only its rank's experts. A model knows nothing more of it.
//
// The exchanges are staged (start, then finish), so that with micro_batches() = N > 1 the block
// cuts a forward's tokens into N parts whose exchanges overlap each other's expert compute
// (Domino-EP): part i + 1's dispatch is in flight while part i's experts run, and the combines
// while the next parts and the shared experts compute.
class TokenDispatcher {
 public:
  struct Dispatched {
    torch::Tensor rows;                 // for this rank's experts, grouped by local expert
    std::vector<int64_t> local_counts;  // rows of each local expert
    std::shared_ptr<void> state;        // the exchange in flight, and the way back
  };
  virtual ~TokenDispatcher() = default;
  // rows sorted by expert; counts: rows of each of the E experts. local_counts are known on
  // return, rows only after finish_dispatch().
  virtual Dispatched start_dispatch(const torch::Tensor& rows, const std::vector<int64_t>& counts) = 0;
  virtual void finish_dispatch(Dispatched& dispatched) = 0;
  // The local experts' outputs, in dispatch's order, on their way back; finish_combine() returns
  // them in the order of the rows dispatched.
  virtual void start_combine(const torch::Tensor& outputs, Dispatched& dispatched) = 0;
  virtual torch::Tensor finish_combine(Dispatched& dispatched) = 0;
  virtual int64_t micro_batches() const { return 1; }

  Dispatched dispatch(const torch::Tensor& rows, const std::vector<int64_t>& counts) {
    auto dispatched = start_dispatch(rows, counts);
    finish_dispatch(dispatched);
    return dispatched;
  }
  torch::Tensor combine(const torch::Tensor& outputs, Dispatched& dispatched) {
    start_combine(outputs, dispatched);
    return finish_combine(dispatched);
  }
};

class MoeBlockImpl : public torch::nn::Module, public FusedKernelUser, public Float8User {
 public:
  explicit MoeBlockImpl(const MoeOptions& options);
  // x: [..., H] -> [..., H]; the routing of its tokens (flattened) in `routing` when not null.
  torch::Tensor forward(const torch::Tensor& x, Routing* routing = nullptr);
  Routing route(const torch::Tensor& tokens) const;  // tokens: [T, H]
  virtual ~MoeBlockImpl() = default;
  // Router and experts ~ N(0, std^2), except down_proj, which writes into the residual stream.
  void describe_init(const std::string& name, double std, double output_std, InitPlan& plan) const;

  // sigmoid_bias: bias += rate * sign(mean(load) - load), load the tokens each expert received
  // in the step (summed over the data ranks by the caller), so that overloaded experts are
  // chosen less. The bias takes part in choosing experts only, never in weighing them.
  void update_expert_bias(const torch::Tensor& load, double rate);

  // Hands the experts' rows to `dispatcher`; the experts' weights must then be this rank's,
  // [E / ranks, ...] (expert parallelism sets both: parallel::shard_experts).
  void set_dispatcher(std::shared_ptr<TokenDispatcher> dispatcher) { dispatcher_ = std::move(dispatcher); }
  const std::shared_ptr<TokenDispatcher>& dispatcher() const { return dispatcher_; }

  // Tensor parallelism, once the experts' weights are this tp rank's [E / tp, ...] and the
  // shared experts' their slices (LlamaForCausalLM::tensor_parallel_plan).
  void use_tensor_parallel(std::shared_ptr<TensorParallelOps> ops);

  // The tensors that hold one slice per expert (first dimension E), with their names under the
  // block: what expert and tensor parallelism split (handles of the parameters: set_data on one
  // changes the parameter).
  std::vector<std::pair<std::string, torch::Tensor>> expert_weights() const;

  torch::Tensor gate_weight;              // [E, H], registered as gate.weight (GPT-OSS: router.weight)
  torch::Tensor router_bias;              // [E], a biased router's (GPT-OSS's router.bias)
  torch::Tensor gate_up_bias, down_bias;  // biased experts' experts.gate_up_proj_bias and down_proj_bias
  torch::Tensor expert_bias;              // [E] buffer gate.e_score_correction_bias (sigmoid_bias)
  torch::Tensor gate_up_proj, down_proj;  // registered under experts.
  SwiGLU shared_experts{nullptr};         // when num_shared_experts > 0
  Linear shared_expert_gate{nullptr};     // [1, H], when shared_expert_gate
  bool fused = false;  // the experts' silu(gate) * up by model/kernels/fused_swiglu.h where it applies
  // The experts' and the shared experts' choice.
  void set_fused_kernels(bool on) override;
  // The experts and the shared experts; the router and shared_expert_gate stay in high precision.
  void float8_layers(const std::string& name, Float8Layers& layers) override;
  std::shared_ptr<const Float8Recipe> float8;  // the experts' products in FP8 (model/layers/float8_linear.h)

 protected:
  // How a family stores its experts (model/gpt_oss/clamped_experts.h): the router's module name,
  // biases on the router and the experts, and the experts' matrices held [in, out] (transposed)
  // rather than [out, in].
  struct ExpertLayout {
    const char* router = "gate";
    bool biased = false;
    bool transposed = false;
  };
  MoeBlockImpl(const MoeOptions& options, const ExpertLayout& layout);
  // Every held expert's matrices, views of gate_up_proj and down_proj.
  struct ExpertMatrices {
    std::vector<torch::Tensor> gate_up, down;
  };
  // The chosen experts, their weights and the router probabilities, from routing.logits (fp32),
  // before routed_scaling_factor.
  virtual void choose(Routing& routing) const;
  // Expert `expert`'s output on its rows: SwiGLU, gate rows first.
  virtual torch::Tensor expert(const torch::Tensor& rows, const ExpertMatrices& matrices, int64_t expert) const;
  // The router's parameters' init (and any biases').
  virtual void describe_router(const std::string& name, double std, InitPlan& plan) const;
  // rows [T, K] times one expert's `matrix` [N, K] (`transposed`: held [K, N]) of `weight`
  // (gate_up_proj or down_proj, whose FP8 scales it takes), in the block's precision.
  torch::Tensor expert_product(const torch::Tensor& rows, const torch::Tensor& weight, const torch::Tensor& matrix,
                               int64_t expert, bool transposed) const;
  const MoeOptions& options() const { return options_; }

 private:
  // between: what to compute while the last combines are in flight (the shared experts).
  torch::Tensor run_experts(const torch::Tensor& tokens, Routing& routing, const std::function<void()>& between) const;
  // Through the dispatcher in `parts` token ranges, overlapped; outputs in `order`'s order.
  torch::Tensor exchange_in_parts(const torch::Tensor& tokens, torch::Tensor& order, const torch::Tensor& flat,
                                  int64_t parts, const std::function<void()>& between) const;
  // With a capacity: which of the choices, sorted by expert, each expert computes.
  torch::Tensor within_capacity(const torch::Tensor& order, const torch::Tensor& sorted_weights,
                                std::vector<int64_t>& counts, int64_t tokens) const;
  // Of the counts of every expert, those of the experts this tp rank computes.
  std::vector<int64_t> tp_counts(const std::vector<int64_t>& counts) const;
  // rows grouped by expert (of the experts held here), counts per held expert.
  torch::Tensor compute_experts(const torch::Tensor& rows, const std::vector<int64_t>& counts) const;
  torch::Tensor gate_of_shared(const torch::Tensor& x) const;
  // sigmoid_bias: the experts each token may choose from, as -inf where it may not.
  torch::Tensor group_limited(const torch::Tensor& choice) const;
  MoeOptions options_;
  std::shared_ptr<TokenDispatcher> dispatcher_;  // none: every expert computed here
  std::shared_ptr<TensorParallelOps> tensor_parallel_;
  int64_t tp_first_expert_ = 0, tp_experts_ = 0;  // the experts of this tp rank (all without tp)
};
TORCH_MODULE(MoeBlock);

}  // namespace xtrain::model
