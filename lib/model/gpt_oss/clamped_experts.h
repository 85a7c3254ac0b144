// GPT-OSS's experts (transformers' GptOssMLP), with its names: the router is `router` (weight
// [E, H] and bias [E]; the softmax of the top-k logits weighs the chosen experts), the experts'
// experts.gate_up_proj [E, H, 2I] has gate and up in alternate columns, experts.down_proj is
// [E, I, H], each with a bias (gate_up_proj_bias [E, 2I], down_proj_bias [E, H]), and the
// activation is (clamp(up, -limit, limit) + 1) * g * sigmoid(alpha g), g = min(gate, limit).
// The rest (dispatch, capacity, parallelism, FP8) is the MoE block's (model/layers/moe.h).
#pragma once
#include <string>

#include "model/layers/moe.h"

namespace xtrain::model {

class ClampedExpertsImpl : public MoeBlockImpl {
 public:
  // limit, alpha: model.swiglu_limit and swiglu_alpha.
  ClampedExpertsImpl(const MoeOptions& options, double limit, double alpha);

 protected:
  void choose(Routing& routing) const override;
  torch::Tensor expert(const torch::Tensor& rows, const ExpertMatrices& matrices, int64_t expert) const override;
  void describe_router(const std::string& name, double std, InitPlan& plan) const override;

 private:
  double limit_, alpha_;
};

}  // namespace xtrain::model
