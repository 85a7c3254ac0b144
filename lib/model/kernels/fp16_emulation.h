// fp16 compute on CPUs. LibTorch's CPU kernels have no fp16 matmul, so fp16 training is emulated
// at each projection: its input, weight and output are rounded through fp16 (fp16's precision
// and its range: anything above 65504 becomes inf) while the product itself is taken in fp32,
// as an fp16 tensor core accumulates. Gradients cross the same roundings in backward, so the
// overflow that fp16 loss scaling exists for happens here as it does on a GPU.
//
// While an Fp16EmulationScope is alive on a thread, project() rounds; otherwise it is the plain
// linear layer. The scope only needs to cover the forward pass: the roundings are recorded in
// the autograd graph.
#pragma once
#include <torch/types.h>

namespace xtrain::model {

class Fp16EmulationScope {
 public:
  Fp16EmulationScope();
  ~Fp16EmulationScope();
  Fp16EmulationScope(const Fp16EmulationScope&) = delete;
  Fp16EmulationScope& operator=(const Fp16EmulationScope&) = delete;

 private:
  bool was_enabled_;
};

bool fp16_emulation_enabled();

// x rounded to fp16 and back to its own dtype when emulation is on; x itself otherwise.
torch::Tensor round_to_fp16(const torch::Tensor& x);

// linear(x, weight, bias), with fp16 roundings when emulation is on; bias may be undefined.
torch::Tensor project(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias);

}  // namespace xtrain::model
