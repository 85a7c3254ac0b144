// The closed choices of a mixture-of-experts layer (model/layers/moe.h): how tokens choose experts,
// which tokens an expert over capacity drops, and over what the balancing loss is taken. The
// names are the recipe's (model.router, model.drop_policy, model.router_aux_loss_scope).
#pragma once
#include "util/choice.h"

namespace xtrain::model {

// softmax: top k of the softmax; sigmoid_bias: top k of sigmoid scores plus a balancing bias.
enum class Router { softmax, sigmoid_bias };
// probs: an expert keeps its tokens of highest router weight; position: its earliest ones.
enum class DropPolicy { probs, position };
// layer: each MoE layer's balancing loss, averaged; model: one over every layer's routing.
enum class AuxLossScope { layer, model };

XTRAIN_CHOICES_BEGIN
constexpr const char* to_string(Router value) {
  switch (value) {
    case Router::softmax: return "softmax";
    case Router::sigmoid_bias: return "sigmoid_bias";
  }
  return nullptr;
}

constexpr const char* to_string(DropPolicy value) {
  switch (value) {
    case DropPolicy::probs: return "probs";
    case DropPolicy::position: return "position";
  }
  return nullptr;
}

constexpr const char* to_string(AuxLossScope value) {
  switch (value) {
    case AuxLossScope::layer: return "layer";
    case AuxLossScope::model: return "model";
  }
  return nullptr;
}
XTRAIN_CHOICES_END

}  // namespace xtrain::model
