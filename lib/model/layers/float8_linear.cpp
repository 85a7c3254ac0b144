#include "model/layers/float8_linear.h"

#include <mutex>
#include <unordered_map>

#include <ATen/autocast_mode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/torch.h>

#include "model/layers/linear.h"
#include "model/layers/moe.h"

namespace xtrain::model {

Float8LinearBlocks scaling_blocks(Float8Scaling scaling) {
  constexpr int64_t whole = 0, edge = kFloat8BlockEdge;
  switch (scaling) {
    case Float8Scaling::rowwise:  // torchao's axiswise dims: each operand scaled along its GEMM's reduction
      return {{{1, whole}, {1, whole}}, {{1, whole}, {whole, 1}}, {{whole, 1}, {whole, 1}}};
    case Float8Scaling::rowwise_with_gw_hp:  // as rowwise, with W tensorwise for dx and dW unquantized
      return {{{1, whole}, {1, whole}}, {{1, whole}, {whole, whole}}, {{}, {}, true}};
    case Float8Scaling::blockwise:  // DeepSeek-V3: 1x128 tiles along K, 128x1 along M for wgrad, 128x128 weights
      return {{{1, edge}, {edge, edge}}, {{1, edge}, {edge, edge}}, {{edge, 1}, {edge, 1}}};
    case Float8Scaling::tensorwise:
    case Float8Scaling::off: break;
  }
  return {};
}

namespace {

bool same(ScaleBlock a, ScaleBlock b) { return a.rows == b.rows && a.cols == b.cols; }

Float8Operand transposed(const Float8Operand& operand) { return {operand.data.t(), operand.scale.t()}; }

torch::Tensor column_major(const torch::Tensor& t) { return t.t().is_contiguous() ? t : t.t().contiguous().t(); }

// CUDA's fp8 GEMM takes one scale per operand, or one per row of a and per column of b, on
// dimensions that are multiples of 16.
bool scaled_mm_applies(const Float8Operand& a, const Float8Operand& b) {
  if (!a.data.is_cuda()) return false;
  const int64_t m = a.data.size(0), k = a.data.size(1), n = b.data.size(1);
  if (m % 16 != 0 || k % 16 != 0 || n % 16 != 0) return false;
  const bool tensorwise = a.scale.numel() == 1 && b.scale.numel() == 1;
  const auto one_per = [](const torch::Tensor& scale, int64_t rows, int64_t cols) {
    return scale.numel() == 1 || (scale.size(0) == rows && scale.size(1) == cols);
  };
  return tensorwise || (one_per(a.scale, m, 1) && one_per(b.scale, 1, n));
}

// The scales _scaled_mm takes for `operand`: its reciprocals, a single one spread to a row or
// column of them when the other operand is scaled by row (rowwise_with_gw_hp's input gradient).
torch::Tensor scaled_mm_scale(const Float8Operand& operand, bool rowwise, int64_t rows, int64_t cols) {
  const auto inverse = operand.scale.reciprocal();
  return (rowwise ? inverse.expand({rows, cols}) : inverse).contiguous();
}

}  // namespace

torch::Tensor float8_mm(const Float8Operand& a, const Float8Operand& b) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  if (scaled_mm_applies(a, b)) {
    const bool tensorwise = a.scale.numel() == 1 && b.scale.numel() == 1;
    const int64_t m = a.data.size(0), n = b.data.size(1);
    // Rowwise scaling gives bf16 only; torchao's output is the layer's dtype, bf16 in training.
    const auto out = tensorwise ? torch::kFloat32 : torch::kBFloat16;
    return at::_scaled_mm(a.data.contiguous(), column_major(b.data), scaled_mm_scale(a, !tensorwise, m, 1),
                          scaled_mm_scale(b, !tensorwise, 1, n), std::nullopt, std::nullopt, out, false)
        .to(torch::kFloat32);
  }
  return torch::mm(a.dequantize(), b.dequantize());
}

std::string float8_gemm_path(Float8Scaling scaling, c10::DeviceType device) {
  const std::string path = device == c10::DeviceType::CUDA && scaling != Float8Scaling::blockwise
                               ? "at::_scaled_mm"
                               : "dequantize + fp32 matmul";
  return scaling == Float8Scaling::rowwise_with_gw_hp ? path + "; weight gradient unquantized" : path;
}

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class Float8Matmul : public torch::autograd::Function<Float8Matmul> {
 public:
  // x [M, K], weight [N, K]: x W^T [M, N] in fp32.
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& weight,
                               int64_t scaling, int64_t grad_format,
                               const std::optional<torch::Tensor>& given_scales) {
    const auto weight_scales = given_scales ? *given_scales : torch::Tensor();
    ctx->save_for_backward({x, weight});
    ctx->saved_data["scaling"] = scaling;
    ctx->saved_data["grad_format"] = grad_format;
    if (given_scales) ctx->saved_data["weight_scales"] = weight_scales;
    const auto recipe = recipe_of(scaling, grad_format);
    const auto blocks = scaling_blocks(recipe.scaling).forward;
    const auto qx = quantize_float8(x, c10::ScalarType::Float8_e4m3fn, blocks.a, recipe.power_of_two());
    const auto qw = quantize_float8(weight, c10::ScalarType::Float8_e4m3fn, blocks.b, recipe.power_of_two(),
                                    weight_scales);
    return float8_mm(qx, transposed(qw));
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const auto& x = saved[0];
    const auto& weight = saved[1];
    const auto recipe = recipe_of(ctx->saved_data["scaling"].toInt(), ctx->saved_data["grad_format"].toInt());
    const auto found = ctx->saved_data.find("weight_scales");
    const auto weight_scales = found == ctx->saved_data.end() ? torch::Tensor() : found->second.toTensor();
    const auto blocks = scaling_blocks(recipe.scaling);
    const bool p2 = recipe.power_of_two();
    const auto dy = grad_outputs[0].contiguous();
    torch::Tensor dx, dw;
    std::optional<Float8Operand> q_dy;
    if (ctx->needs_input_grad(0)) {
      q_dy = quantize_float8(dy, recipe.grad_format, blocks.input_grad.a, p2);
      // The forward's scales serve whenever the blocks are the forward's (tensorwise, blockwise).
      const auto scales = same(blocks.input_grad.b, blocks.forward.b) ? weight_scales : torch::Tensor();
      dx = float8_mm(*q_dy, quantize_float8(weight, c10::ScalarType::Float8_e4m3fn, blocks.input_grad.b, p2, scales));
    }
    if (ctx->needs_input_grad(1) && blocks.weight_grad.high_precision) {
      // torchao multiplies the output gradient as it arrives, in the layer's dtype, by the saved x.
      dw = torch::mm(dy.to(x.scalar_type()).t(), x);
    } else if (ctx->needs_input_grad(1)) {
      const auto q_dy_w = q_dy && same(blocks.weight_grad.a, blocks.input_grad.a)
                              ? *q_dy
                              : quantize_float8(dy, recipe.grad_format, blocks.weight_grad.a, p2);
      dw = float8_mm(transposed(q_dy_w),
                     quantize_float8(x, c10::ScalarType::Float8_e4m3fn, blocks.weight_grad.b, p2));
    }
    return {dx.defined() ? dx.to(x.scalar_type()) : dx, dw.defined() ? dw.to(weight.scalar_type()) : dw,
            torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }

 private:
  static Float8Recipe recipe_of(int64_t scaling, int64_t grad_format) {
    return {static_cast<Float8Scaling>(scaling), static_cast<c10::ScalarType>(grad_format)};
  }
};

}  // namespace

namespace {

// Under autocast, F::linear computes in the autocast dtype and returns it; torchao's Float8Linear
// casts its input the same way. So the FP8 path takes x in that dtype too (quantized from it),
// and its output, and the gradient it returns for x, are what a bf16 run's linear layer rounds
// them to, not fp32.
torch::Tensor in_autocast_dtype(const torch::Tensor& x) {
  const auto device = x.device().type();
  if (!x.is_floating_point() || !at::autocast::is_autocast_enabled(device)) return x;
  const auto dtype = at::autocast::get_autocast_dtype(device);
  return x.scalar_type() == dtype ? x : x.to(dtype);
}

}  // namespace

torch::Tensor float8_linear(const torch::Tensor& input, const torch::Tensor& weight, const torch::Tensor& bias,
                            const Float8Recipe& recipe, const torch::Tensor& weight_scales) {
  const auto x = in_autocast_dtype(input);
  const int64_t in = x.size(-1);
  auto out_shape = x.sizes().vec();
  out_shape.back() = weight.size(0);
  auto y = Float8Matmul::apply(x.reshape({-1, in}), weight, static_cast<int64_t>(recipe.scaling),
                               static_cast<int64_t>(recipe.grad_format),
                               weight_scales.defined() ? std::optional<torch::Tensor>(weight_scales) : std::nullopt)
               .to(x.scalar_type())
               .view(out_shape);
  return bias.defined() ? y + bias.to(y.scalar_type()) : y;
}

namespace {
std::mutex gathered_mutex;
std::unordered_map<const c10::TensorImpl*, torch::Tensor>& gathered() {
  static std::unordered_map<const c10::TensorImpl*, torch::Tensor> scales;
  return scales;
}
}  // namespace

void register_gathered_float8_scales(const torch::Tensor& weight, const torch::Tensor& scales) {
  std::lock_guard lock(gathered_mutex);
  gathered()[weight.unsafeGetTensorImpl()] = scales;
}

void unregister_gathered_float8_scales(const torch::Tensor& weight) {
  std::lock_guard lock(gathered_mutex);
  gathered().erase(weight.unsafeGetTensorImpl());
}

torch::Tensor gathered_float8_scales(const torch::Tensor& weight) {
  std::lock_guard lock(gathered_mutex);
  const auto found = gathered().find(weight.unsafeGetTensorImpl());
  return found == gathered().end() ? torch::Tensor() : found->second;
}

Float8Weights apply_float8(Float8User& model, const Float8Recipe& recipe) {
  Float8Weights converted;
  if (recipe.scaling == Float8Scaling::off) return converted;
  const auto shared = std::make_shared<const Float8Recipe>(recipe);
  const auto weight_block = scaling_blocks(recipe.scaling).forward.b;
  Float8Layers layers;
  model.float8_layers("", layers);
  for (const auto& [name, linear] : layers.linears) {
    linear->float8 = shared;
    converted[name + ".weight"] = weight_block;
  }
  for (const auto& [name, moe] : layers.experts) {
    moe->float8 = shared;
    converted[name + ".experts.gate_up_proj"] = weight_block;
    converted[name + ".experts.down_proj"] = weight_block;
  }
  return converted;
}

}  // namespace xtrain::model
