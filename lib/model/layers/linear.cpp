#include "model/layers/linear.h"

#include <cmath>

#include <torch/torch.h>

#include "model/kernels/fp16_emulation.h"
#include "model/layers/parameter_source.h"
#include "model/layers/weight_grad_store.h"

namespace xtrain::model {

LinearImpl::LinearImpl(int64_t in_features, int64_t out_features, bool with_bias) {
  weight = register_parameter("weight", unmaterialized({out_features, in_features}));
  if (with_bias) bias = register_parameter("bias", unmaterialized({out_features}));
}

torch::Tensor LinearImpl::forward(const torch::Tensor& x) { return project_with(x, weight, bias); }

torch::Tensor LinearImpl::project_with(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) const {
  auto y = base_product(x, w, b);
  if (!lora_A) return y;
  return y + lora_B->forward(lora_A->forward(lora_dropout.apply(x))) * lora_scale;
}

torch::Tensor AdapterDropout::apply(const torch::Tensor& x) const {
  if (p <= 0 || !key || !key->defined()) return x;
  TORCH_CHECK(x.dim() == 3, "a LoRA adapter's dropout takes [batch, tokens, features], not ", x.sizes());
  return hidden_dropout(x, p, *key, layer, site);
}

torch::Tensor LinearImpl::base_product(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) const {
  if (float8) return float8_linear(x, w, b, *float8, gathered_float8_scales(w));
  // Under a zero-bubble pipeline schedule the weight's gradient waits for its W pass.
  if (WeightGradStore::defers(x, w)) return deferred_weight_linear(x, w, b, *WeightGradStore::current());
  return project(x, w, b);
}

void LinearImpl::describe_init(const std::string& name, double std, InitPlan& plan) const {
  plan[name + ".weight"] = {ParameterInit::Kind::normal, std};
  if (bias.defined()) plan[name + ".bias"] = {ParameterInit::Kind::zeros, 0.0};
  if (!lora_A) return;
  plan[name + ".lora_A.weight"] = {ParameterInit::Kind::normal, 1.0 / std::sqrt(3.0 * static_cast<double>(weight.size(1)))};
  plan[name + ".lora_B.weight"] = {ParameterInit::Kind::zeros, 0.0};
}

void LinearImpl::add_adapter(int64_t rank, double scale, AdapterDropout dropout) {
  lora_A = register_module("lora_A", std::make_shared<LinearImpl>(weight.size(1), rank, false));
  lora_B = register_module("lora_B", std::make_shared<LinearImpl>(rank, weight.size(0), false));
  lora_scale = scale;
  lora_dropout = std::move(dropout);
}

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// torch::embedding, whose backward adds the looked-up rows' gradients to the table's existing
// .grad (index_add_ over the distinct ids, so that no row is written twice) and hands autograd
// none; without a .grad, the dense gradient that torch::embedding's backward gives.
class InPlaceGradLookup : public torch::autograd::Function<InPlaceGradLookup> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& weight, const torch::Tensor& ids,
                               int64_t padding_idx) {
    ctx->saved_data["weight"] = weight;
    ctx->saved_data["padding_idx"] = padding_idx;
    ctx->save_for_backward({ids});
    return torch::embedding(weight, ids, padding_idx);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto weight = ctx->saved_data["weight"].toTensor();
    const int64_t padding_idx = ctx->saved_data["padding_idx"].toInt();
    const auto ids = ctx->get_saved_variables()[0].reshape({-1});
    auto grad = grad_outputs[0].reshape({-1, weight.size(1)});
    auto& existing = weight.mutable_grad();
    if (!existing.defined() || torch::GradMode::is_enabled() || existing.scalar_type() != grad.scalar_type())
      return {torch::embedding_backward(grad, ids, weight.size(0), padding_idx, false, false), torch::Tensor(),
              torch::Tensor()};
    if (padding_idx >= 0) grad = grad.masked_fill(ids.eq(padding_idx).unsqueeze(1), 0);
    const auto [distinct, position] = torch::_unique(ids, /*sorted=*/true, /*return_inverse=*/true);
    // Each distinct id's summed rows, as the dense backward sums them, then one add per row.
    const auto rows = torch::embedding_dense_backward(grad, position, distinct.size(0), -1, false);
    existing.index_add_(0, distinct, rows);
    return {torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

void accumulate_lookup_grads_in_place(LookupTableOwner& model) {
  for (auto* table : model.lookup_tables()) table->accumulate_grad_in_place = true;
}

EmbeddingImpl::EmbeddingImpl(int64_t num_embeddings, int64_t dim) {
  weight = register_parameter("weight", unmaterialized({num_embeddings, dim}));
}

void EmbeddingImpl::split_vocabulary(std::shared_ptr<TensorParallelOps> ops, int64_t vocab_size) {
  first_row = split_share(vocab_size, ops->rank(), ops->size()).first;
  tensor_parallel = std::move(ops);
}

torch::Tensor EmbeddingImpl::forward(const torch::Tensor& ids) {
  auto lookup = [this](const torch::Tensor& table_ids, int64_t padding) {
    if (accumulate_grad_in_place && weight.requires_grad() && torch::GradMode::is_enabled())
      return InPlaceGradLookup::apply(weight, table_ids, padding);
    return torch::embedding(weight, table_ids, padding);
  };
  if (!tensor_parallel) return lookup(ids, padding_idx);
  const auto local = ids - first_row;
  const auto mine = local.ge(0).logical_and(local.lt(weight.size(0)));
  // The padding row, where this rank holds it, takes no gradient from its lookups here either.
  const bool holds_padding = padding_idx >= first_row && padding_idx < first_row + weight.size(0);
  const auto rows = lookup(local.masked_fill(mine.logical_not(), 0), holds_padding ? padding_idx - first_row : -1);
  return tensor_parallel->leave(rows * mine.unsqueeze(-1).to(rows.scalar_type()));
}

void EmbeddingImpl::describe_init(const std::string& name, double std, InitPlan& plan) const {
  plan[name + ".weight"] = {ParameterInit::Kind::normal, std};
}

}  // namespace xtrain::model
