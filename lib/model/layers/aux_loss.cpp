#include "model/layers/aux_loss.h"

#include <torch/torch.h>

namespace xtrain::model {
namespace {

struct AttachLoss : public torch::autograd::Function<AttachLoss> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& /*loss*/, double weight) {
    ctx->saved_data["weight"] = weight;
    return x.view_as(x);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const double weight = ctx->saved_data["weight"].toDouble();
    return {grads[0], torch::full({}, weight, grads[0].options().dtype(torch::kFloat32)), torch::Tensor()};
  }
};

// saved_data, unlike save_for_backward, holds the coefficients without a version check: they are
// written after the forward on purpose.
struct AttachLossTerms : public torch::autograd::Function<AttachLossTerms> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& /*terms*/, const torch::Tensor& coefficients, double weight) {
    ctx->saved_data["coefficients"] = coefficients;
    ctx->saved_data["weight"] = weight;
    return x.view_as(x);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto coefficients = ctx->saved_data["coefficients"].toTensor();
    const double weight = ctx->saved_data["weight"].toDouble();
    return {grads[0], coefficients * weight, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor attach_loss_terms(const torch::Tensor& x, const torch::Tensor& terms, const torch::Tensor& coefficients,
                                double weight) {
  return AttachLossTerms::apply(x, terms, coefficients, weight);
}

torch::Tensor attach_loss(const torch::Tensor& x, const torch::Tensor& loss, double weight) {
  return AttachLoss::apply(x, loss, weight);
}

}  // namespace xtrain::model
