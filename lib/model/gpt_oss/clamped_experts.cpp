#include "model/gpt_oss/clamped_experts.h"

#include <torch/torch.h>

namespace xtrain::model {

ClampedExpertsImpl::ClampedExpertsImpl(const MoeOptions& options, double limit, double alpha)
    : MoeBlockImpl(options, ExpertLayout{"router", /*biased=*/true, /*transposed=*/true}),
      limit_(limit),
      alpha_(alpha) {}

// The softmax of the chosen logits, as GPT-OSS computes it.
void ClampedExpertsImpl::choose(Routing& r) const {
  r.probs = torch::softmax(r.logits, -1);
  auto [top, experts] = r.logits.topk(options().top_k, -1);
  r.weights = torch::softmax(top, -1);
  r.experts = experts;
}

// transformers' GptOssExperts, in its order of operations.
torch::Tensor ClampedExpertsImpl::expert(const torch::Tensor& rows, const ExpertMatrices& matrices,
                                         int64_t expert) const {
  using torch::indexing::None;
  using torch::indexing::Slice;
  const auto gate_up = expert_product(rows, gate_up_proj, matrices.gate_up[static_cast<size_t>(expert)], expert, true) +
                       gate_up_bias[expert];
  const auto gate = gate_up.index({"...", Slice(0, None, 2)}).clamp_max(limit_);
  const auto up = gate_up.index({"...", Slice(1, None, 2)}).clamp(-limit_, limit_);
  const auto glu = gate * torch::sigmoid(gate * alpha_);
  return expert_product((up + 1) * glu, down_proj, matrices.down[static_cast<size_t>(expert)], expert, true) +
         down_bias[expert];
}

void ClampedExpertsImpl::describe_router(const std::string& name, double std, InitPlan& plan) const {
  plan[name + ".router.weight"] = {ParameterInit::Kind::normal, std};
  plan[name + ".router.bias"] = {ParameterInit::Kind::zeros, 0.0};
  plan[name + ".experts.gate_up_proj_bias"] = {ParameterInit::Kind::zeros, 0.0};
  plan[name + ".experts.down_proj_bias"] = {ParameterInit::Kind::zeros, 0.0};
}

}  // namespace xtrain::model
