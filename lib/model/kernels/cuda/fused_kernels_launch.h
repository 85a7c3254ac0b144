// Launchers of the fused elementwise CUDA kernels (fused_kernels.cu), on raw device pointers:
// torch-free, so that nvcc never compiles a LibTorch header. Each call queues its kernel(s) on
// `stream` and returns; it checks nothing (fused_kernels_cuda.h checks the tensors and the
// launch). Pointers are to contiguous arrays of `dtype` elements unless typed otherwise; all
// arithmetic is fp32, each result rounded once to the output type. The semantics of each kernel
// are those of xtrain::model::cuda's tensor API (fused_kernels_cuda.h).
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

namespace xtrain::model::cuda {

enum class KernelDtype { f32, bf16, f16 };

// x, w -> y, rstd (fp32 [rows]).
void launch_rms_norm_forward(KernelDtype dtype, const void* x, const void* w, void* y, float* rstd, int64_t rows,
                             int64_t d, float eps, cudaStream_t stream);

// The backward's scratch: row_scale is fp32 [rows]; dw_partial is fp64
// [rms_norm_backward_chunks(rows, d), d]. dw is fp32 [d].
int64_t rms_norm_backward_chunks(int64_t rows, int64_t d);
void launch_rms_norm_backward(KernelDtype dtype, const void* g, const void* x, const void* w, const float* rstd,
                              void* dx, float* dw, float* row_scale, double* dw_partial, int64_t rows, int64_t d,
                              cudaStream_t stream);

void launch_swiglu_forward(KernelDtype dtype, const void* gate, const void* up, void* out, int64_t n,
                           cudaStream_t stream);
void launch_swiglu_backward(KernelDtype dtype, const void* g, const void* gate, const void* up, void* dgate,
                            void* dup, int64_t n, cudaStream_t stream);

// q: [batch * tokens, q_heads, head_dim], k: [batch * tokens, k_heads, head_dim];
// cos, sin: fp32 [tokens, head_dim].
void launch_rotary_qk(KernelDtype dtype, const void* q, const void* k, const float* cos, const float* sin,
                      void* q_out, void* k_out, int64_t batch, int64_t tokens, int64_t q_heads, int64_t k_heads,
                      int64_t head_dim, bool inverse, cudaStream_t stream);

// The step's scalars, rounded to fp32 from values computed in double on the host.
struct AdamWScalars {
  float decay;            // 1 - lr * weight_decay
  float beta1, one_minus_beta1;
  float beta2, one_minus_beta2;
  float neg_step_size;    // -lr / (1 - beta1^step)
  float bias_correction2_sqrt;  // sqrt(1 - beta2^step)
  float eps;
};
void launch_adamw_step(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
                       const AdamWScalars& scalars, cudaStream_t stream);

}  // namespace xtrain::model::cuda
