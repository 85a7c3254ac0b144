// FP8 linear layers (precision.fp8): y = x W^T with x and W quantized to e4m3 (model/layers/float8.h),
// and in backward the output gradient quantized to e4m3 or e5m2, in all three GEMMs, as
// torchao's Float8Linear does (its matmul_with_hp_or_float8_args, dynamic scaling):
//   forward       y  = q(x) q(W)^T
//   input grad    dx = q(dy) q(W)
//   weight grad   dW = q(dy)^T q(x)
// each operand in the blocks its scaling sets (scaling_blocks()); rowwise_with_gw_hp (torchao's
// recipe of that name) computes the weight gradient from the unquantized dy and x instead. The
// high-precision x and W are what backward keeps, and master weights, gradients and optimizer
// state stay fp32.
//
// The GEMM (float8_mm) runs at::_scaled_mm on CUDA for tensorwise and rowwise operands, whose
// scales it takes; everywhere else it dequantizes the operands and multiplies in fp32, which is
// the same product of the same fp8 values (torchao's emulate mode computes it so).
#pragma once
#include <map>
#include <memory>
#include <string>

#include <torch/nn/module.h>

#include "model/layers/float8.h"
#include "model/layers/float8_user.h"

namespace xtrain::model {

struct Float8Recipe {
  Float8Scaling scaling = Float8Scaling::off;
  c10::ScalarType grad_format = c10::ScalarType::Float8_e5m2;  // of the output gradient
  // Rowwise scales are powers of two (torchao's rowwise recipes); the others are exact.
  bool power_of_two() const { return is_rowwise(scaling); }
};

// The operands' blocks of one GEMM: a [M, K] times b [K, N] (b given as the layer holds it), or
// neither quantized (the GEMM in the operands' own precision).
struct Float8GemmBlocks {
  ScaleBlock a, b;
  bool high_precision = false;
};
struct Float8LinearBlocks {
  Float8GemmBlocks forward;      // x [M, K], W [N, K]
  Float8GemmBlocks input_grad;   // dy [M, N], W [N, K]
  Float8GemmBlocks weight_grad;  // dy [M, N], x [M, K]
};
Float8LinearBlocks scaling_blocks(Float8Scaling scaling);

// a [M, K] times b [K, N] in fp32.
torch::Tensor float8_mm(const Float8Operand& a, const Float8Operand& b);
// Which GEMM float8_mm runs for this scaling on this device, for the start-up line and docs.
std::string float8_gemm_path(Float8Scaling scaling, c10::DeviceType device);

// x [..., K] W^T [N, K] + bias in FP8, in x's dtype (under autocast, the autocast dtype, as
// F::linear and torchao's Float8Linear return). `weight_scales`, when defined, are W's
// block scales to use as they are (a weight gathered in FP8, below).
torch::Tensor float8_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                            const Float8Recipe& recipe, const torch::Tensor& weight_scales = {});

// A weight that an FSDP unit gathered in FP8 holds the dequantized values of its fp8 bytes, and
// its block scales are registered here while it is gathered: the layer quantizes with exactly
// them, so that it recovers the same bytes the one-process run computes from the fp32 weight.
void register_gathered_float8_scales(const torch::Tensor& weight, const torch::Tensor& scales);
void unregister_gathered_float8_scales(const torch::Tensor& weight);
torch::Tensor gathered_float8_scales(const torch::Tensor& weight);  // undefined when none

// What apply_float8 converted: each weight's full name and the blocks its forward scales are
// taken over (an FSDP unit gathers it in those blocks: tensorwise and blockwise only, where
// one quantization of W serves forward and input gradient alike).
using Float8Weights = std::map<std::string, ScaleBlock>;

// Sets the recipe on the linear layers and the MoE blocks' experts that `model` hands over
// (model/layers/float8_user.h: every linear layer but the output head and the gates). Returns
// the weights converted.
Float8Weights apply_float8(Float8User& model, const Float8Recipe& recipe);

}  // namespace xtrain::model
