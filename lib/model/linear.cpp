#include "model/linear.h"

#include <torch/torch.h>

#include "model/fp16_emulation.h"
#include "model/parameter_source.h"

namespace xtrain::model {

LinearImpl::LinearImpl(int64_t in_features, int64_t out_features, bool with_bias) {
  weight = register_parameter("weight", unmaterialized({out_features, in_features}));
  if (with_bias) bias = register_parameter("bias", unmaterialized({out_features}));
}

torch::Tensor LinearImpl::forward(const torch::Tensor& x) { return project(x, weight, bias); }

void LinearImpl::describe_init(const std::string& name, double std, InitPlan& plan) const {
  plan[name + ".weight"] = {ParameterInit::Kind::normal, std};
  if (bias.defined()) plan[name + ".bias"] = {ParameterInit::Kind::zeros, 0.0};
}

EmbeddingImpl::EmbeddingImpl(int64_t num_embeddings, int64_t dim) {
  weight = register_parameter("weight", unmaterialized({num_embeddings, dim}));
}

torch::Tensor EmbeddingImpl::forward(const torch::Tensor& ids) {
  if (!tensor_parallel) return torch::embedding(weight, ids, padding_idx);
  const auto local = ids - first_row;
  const auto mine = local.ge(0).logical_and(local.lt(weight.size(0)));
  const auto rows = torch::embedding(weight, local.masked_fill(mine.logical_not(), 0));
  return tensor_parallel->leave(rows * mine.unsqueeze(-1).to(rows.scalar_type()));
}

void EmbeddingImpl::describe_init(const std::string& name, double std, InitPlan& plan) const {
  plan[name + ".weight"] = {ParameterInit::Kind::normal, std};
}

}  // namespace xtrain::model
