// bf16 GEMMs on CPUs that ATen has no fast bf16 kernel for. ATen hands a CPU bf16 GEMM to oneDNN
// only where the CPU has AVX-512 (BW, VL and DQ); elsewhere (AVX2 machines) it runs a scalar
// loop at 0.3-0.7 GFLOP/s a core, 15-30x slower than its fp32 GEMM. There the product is taken
// as an fp32 GEMM of the bf16 operands, which is exact per product (a bf16 x bf16 product fits
// in fp32), accumulated in fp32 and rounded once to bf16: what ATen's own loop computes, in
// another summation order, and what a GPU's tensor cores compute. Autograd records the casts, so
// the backward GEMMs widen the same way. Any other dtype or device takes ATen's kernel as is.
#pragma once
#include <torch/types.h>

namespace xtrain::model {

// Whether a GEMM with this operand is widened here: the operand is on the CPU and bf16, or fp32
// under CPU autocast to bf16, and the CPU has no fast bf16 GEMM (or a scope below says widen).
bool widens_bf16_gemm(const torch::Tensor& operand);

// Widens (true) or leaves bf16 GEMMs to ATen (false) on this thread while alive, whatever the
// CPU: both paths can be compared on any machine.
class Bf16GemmWideningScope {
 public:
  explicit Bf16GemmWideningScope(bool widen);
  ~Bf16GemmWideningScope();
  Bf16GemmWideningScope(const Bf16GemmWideningScope&) = delete;
  Bf16GemmWideningScope& operator=(const Bf16GemmWideningScope&) = delete;

 private:
  int previous_;
};

torch::Tensor widened_matmul(const torch::Tensor& a, const torch::Tensor& b);  // torch::matmul
torch::Tensor widened_mm(const torch::Tensor& a, const torch::Tensor& b);      // torch::mm
// torch::nn::functional::linear; bias may be undefined.
torch::Tensor widened_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias);

}  // namespace xtrain::model
