// The CUDA kernels' entry points in a build without the CUDA paths (XTRAIN_CUDA off; empty in a
// CUDA build, where model/kernels/cuda defines them), so that the CPU kernels call them without
// preprocessor branches and compile once for both variants. Nothing reaches them there:
// cuda_fused_kernel_takes answers false for every tensor.
#include "model/kernels/cuda/fused_kernels_cuda.h"

#include <c10/util/Exception.h>

#ifndef XTRAIN_CUDA
namespace xtrain::model::cuda {
namespace {
[[noreturn]] void absent(const char* kernel) {
  TORCH_CHECK(false, kernel, ": this xtrain was built without the CUDA paths (XTRAIN_CUDA off)");
}
}  // namespace

void rms_norm_forward(const Tensor&, const Tensor&, double, const Tensor&, const Tensor&) { absent("rms_norm_forward"); }
void rms_norm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&) {
  absent("rms_norm_backward");
}
void swiglu_forward(const Tensor&, const Tensor&, const Tensor&) { absent("swiglu_forward"); }
void swiglu_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&) {
  absent("swiglu_backward");
}
void rotary_qk(const Tensor&, const Tensor&, const Tensor&, const Tensor&, bool, const Tensor&, const Tensor&) {
  absent("rotary_qk");
}
void adamw_step(const Tensor&, const Tensor&, const Tensor&, const Tensor&, double, double, double, double, double,
                int64_t) {
  absent("adamw_step");
}

}  // namespace xtrain::model::cuda
#endif
