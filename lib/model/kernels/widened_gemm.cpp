#include "model/kernels/widened_gemm.h"

#include <cstdlib>
#include <string>

#include <ATen/autocast_mode.h>
#include <torch/nn/functional/linear.h>
#include <torch/torch.h>

namespace xtrain::model {
namespace {

thread_local int widening_override = -1;  // -1: the CPU decides; 0 or 1: a scope does

// ATen's own test for sending CPU bf16 GEMMs to oneDNN (mkldnn_bf16_device_check).
bool cpu_has_fast_bf16_gemm() {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#else
  return true;  // ARM and others: ATen's own choice stands
#endif
}

// XTRAIN_CPU_BF16_GEMM=aten or widened overrides the CPU's answer (to measure one against the
// other: scripts/bench/cpu-bf16-gemm.sh); unset or anything else, the CPU decides.
bool widen_by_default() {
  static const bool widen = [] {
    const char* choice = std::getenv("XTRAIN_CPU_BF16_GEMM");
    if (choice && std::string(choice) == "aten") return false;
    if (choice && std::string(choice) == "widened") return true;
    return !cpu_has_fast_bf16_gemm();
  }();
  return widen;
}

// Whether ATen would multiply this operand in bf16: it is bf16, or CPU autocast to bf16 would
// cast it (autocast casts fp32 operands of GEMMs and leaves others alone).
bool multiplied_in_bf16(const torch::Tensor& operand) {
  if (!operand.device().is_cpu()) return false;
  if (operand.scalar_type() == torch::kBFloat16) return true;
  return operand.scalar_type() == torch::kFloat32 && at::autocast::is_autocast_enabled(at::kCPU) &&
         at::autocast::get_autocast_dtype(at::kCPU) == torch::kBFloat16;
}

// The operand rounded to bf16 as autocast would round it, then held exactly in fp32.
torch::Tensor widen(const torch::Tensor& t) { return t.to(torch::kBFloat16).to(torch::kFloat32); }

// gemm() in fp32 with autocast out of the way (it would cast the widened operands back), its
// result rounded once to bf16, as the bf16 GEMM returns it.
template <typename Gemm>
torch::Tensor widened(const Gemm& gemm) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  return gemm().to(torch::kBFloat16);
}

}  // namespace

Bf16GemmWideningScope::Bf16GemmWideningScope(bool widen) : previous_(widening_override) {
  widening_override = widen ? 1 : 0;
}
Bf16GemmWideningScope::~Bf16GemmWideningScope() { widening_override = previous_; }

bool widens_bf16_gemm(const torch::Tensor& operand) {
  if (!multiplied_in_bf16(operand)) return false;
  return widening_override >= 0 ? widening_override == 1 : widen_by_default();
}

torch::Tensor widened_matmul(const torch::Tensor& a, const torch::Tensor& b) {
  if (!widens_bf16_gemm(a) || !widens_bf16_gemm(b)) return torch::matmul(a, b);
  return widened([&] { return torch::matmul(widen(a), widen(b)); });
}

torch::Tensor widened_mm(const torch::Tensor& a, const torch::Tensor& b) {
  if (!widens_bf16_gemm(a) || !widens_bf16_gemm(b)) return torch::mm(a, b);
  return widened([&] { return torch::mm(widen(a), widen(b)); });
}

torch::Tensor widened_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  namespace F = torch::nn::functional;
  if (!widens_bf16_gemm(x) || !widens_bf16_gemm(weight)) return F::linear(x, weight, bias);
  // As F::linear computes it: a 2-d input's bias is added inside the GEMM (addmm, which autocast
  // rounds to bf16 first); any other input's is added to the bf16 product, in its own dtype.
  if (x.dim() == 2 && bias.defined())
    return widened([&] { return torch::addmm(widen(bias), widen(x), widen(weight).t()); });
  auto output = widened([&] { return F::linear(widen(x), widen(weight)); });
  if (bias.defined()) output += bias;
  return output;
}

}  // namespace xtrain::model
