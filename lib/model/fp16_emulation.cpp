#include "model/fp16_emulation.h"

#include <torch/nn/functional/linear.h>

namespace xtrain::model {
namespace {
thread_local bool emulating = false;
}

Fp16EmulationScope::Fp16EmulationScope() : was_enabled_(emulating) { emulating = true; }
Fp16EmulationScope::~Fp16EmulationScope() { emulating = was_enabled_; }

bool fp16_emulation_enabled() { return emulating; }

torch::Tensor round_to_fp16(const torch::Tensor& x) {
  return emulating ? x.to(torch::kHalf).to(x.scalar_type()) : x;
}

torch::Tensor project(torch::nn::Linear& layer, const torch::Tensor& x) {
  if (!emulating) return layer(x);
  const auto bias = layer->bias.defined() ? round_to_fp16(layer->bias) : torch::Tensor();
  return round_to_fp16(torch::nn::functional::linear(round_to_fp16(x), round_to_fp16(layer->weight), bias));
}

}  // namespace xtrain::model
