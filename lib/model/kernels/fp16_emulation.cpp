#include "model/kernels/fp16_emulation.h"

#include <torch/nn/functional/linear.h>

#include "model/kernels/widened_gemm.h"

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

torch::Tensor project(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  namespace F = torch::nn::functional;
  if (!emulating) return widened_linear(x, weight, bias);
  const auto rounded_bias = bias.defined() ? round_to_fp16(bias) : torch::Tensor();
  return round_to_fp16(F::linear(round_to_fp16(x), round_to_fp16(weight), rounded_bias));
}

}  // namespace xtrain::model
