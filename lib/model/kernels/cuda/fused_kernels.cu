// The fused elementwise kernels on CUDA (launchers: fused_kernels_launch.h). CUDA headers only:
// nvcc takes minutes over LibTorch's headers. Compiled without fast math, so expf, sqrtf and
// the divisions round as the fp32 ops they replace do.
#include "model/kernels/cuda/fused_kernels_launch.h"

#include <algorithm>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace xtrain::model::cuda {
namespace {

constexpr int kThreads = 256;  // elementwise kernels and the backward's column tiles
// Enough blocks of an elementwise kernel to fill any current GPU; each thread then strides.
constexpr int64_t kMaxElementwiseBlocks = int64_t{1} << 16;
// The backward's dx/dw pass aims at this many blocks. A constant rather than the device's SM
// count, so that dw's summation order, and with it dw's bits, is the same on every GPU.
constexpr int64_t kBackwardTargetBlocks = 1024;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __half from_float<__half>(float v) {
  return __float2half_rn(v);
}

// v as the element type would hold it, back in fp32: the unfused ops round there.
template <typename T>
__device__ __forceinline__ float round_to(float v) {
  return to_float(from_float<T>(v));
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// The sum over a block whose size is a multiple of 32, in a fixed order, returned to every
// thread: each warp reduces the warps' partial sums itself, so no second barrier is needed.
// One call per kernel: the shared partials are not guarded for reuse.
__device__ float block_sum(float v) {
  __shared__ float partial[32];
  v = warp_sum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  return warp_sum(lane < static_cast<int>(blockDim.x >> 5) ? partial[lane] : 0.0f);
}

// Threads of a block that reduces one row: about 8 elements each, 32 to 512.
int row_threads(int64_t d) { return static_cast<int>(std::clamp<int64_t>(ceil_div(ceil_div(d, 8), 32) * 32, 32, 512)); }

int elementwise_blocks(int64_t n) { return static_cast<int>(std::min(ceil_div(n, kThreads), kMaxElementwiseBlocks)); }

// ---- RMSNorm ------------------------------------------------------------------------------------

// One block per row. y = round(w * round(x * r)): the unfused path rounds the normalised row to
// x's dtype before the weight multiplies it.
template <typename T>
__global__ void rms_norm_forward_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                                        float* __restrict__ rstd, int64_t d, float eps) {
  const int64_t row = blockIdx.x;
  const T* xr = x + row * d;
  T* yr = y + row * d;
  float squares = 0.0f;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    const float v = to_float(xr[i]);
    squares += v * v;
  }
  squares = block_sum(squares);
  const float r = 1.0f / sqrtf(squares / static_cast<float>(d) + eps);
  if (threadIdx.x == 0) rstd[row] = r;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    const float normed = round_to<T>(to_float(xr[i]) * r);
    yr[i] = from_float<T>(to_float(w[i]) * normed);
  }
}

// One block per row: row_scale = r * sum(g*w*x) / d = mean(g*w*n), the projection that dx removes.
template <typename T>
__global__ void rms_norm_row_scale_kernel(const T* __restrict__ g, const T* __restrict__ x, const T* __restrict__ w,
                                          const float* __restrict__ rstd, float* __restrict__ row_scale, int64_t d) {
  const int64_t row = blockIdx.x;
  const T* gr = g + row * d;
  const T* xr = x + row * d;
  float projection = 0.0f;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    projection += to_float(gr[i]) * to_float(w[i]) * to_float(xr[i]);
  }
  projection = block_sum(projection);
  if (threadIdx.x == 0) row_scale[row] = projection * rstd[row] / static_cast<float>(d);
}

// Block (chunk, tile): the chunk's rows, one column of the tile per thread. dx row by row, and
// the chunk's sum of g * n for dw in fp64 (a sum over up to all rows of the batch), each
// thread owning its column, so no atomics. n is rounded to x's dtype for dw, as the unfused
// forward multiplies w by the rounded row; dx differentiates the unrounded n * r, as autograd
// does through the rounding.
template <typename T>
__global__ void rms_norm_backward_kernel(const T* __restrict__ g, const T* __restrict__ x, const T* __restrict__ w,
                                         const float* __restrict__ rstd, const float* __restrict__ row_scale,
                                         T* __restrict__ dx, double* __restrict__ dw_partial, int64_t rows,
                                         int64_t d, int64_t rows_per_chunk) {
  const int64_t col = static_cast<int64_t>(blockIdx.y) * kThreads + threadIdx.x;
  if (col >= d) return;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * rows_per_chunk;
  const int64_t last = first + rows_per_chunk < rows ? first + rows_per_chunk : rows;
  const float wv = to_float(w[col]);
  double dw = 0.0;
  for (int64_t row = first; row < last; ++row) {
    const int64_t at = row * d + col;
    const float r = rstd[row];
    const float gv = to_float(g[at]);
    const float n = to_float(x[at]) * r;
    dx[at] = from_float<T>(r * (gv * wv - n * row_scale[row]));
    dw += static_cast<double>(gv) * static_cast<double>(round_to<T>(n));
  }
  dw_partial[static_cast<int64_t>(blockIdx.x) * d + col] = dw;
}

// dw = the chunks' sums, added in chunk order.
__global__ void rms_norm_dw_kernel(const double* __restrict__ dw_partial, float* __restrict__ dw, int64_t chunks,
                                   int64_t d) {
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (col >= d) return;
  double sum = 0.0;
  for (int64_t c = 0; c < chunks; ++c) sum += dw_partial[c * d + col];
  dw[col] = static_cast<float>(sum);
}

int64_t rms_norm_backward_rows_per_chunk(int64_t rows, int64_t d) {
  const int64_t tiles = ceil_div(d, kThreads);
  const int64_t chunks = std::clamp<int64_t>(ceil_div(kBackwardTargetBlocks, tiles), 1, std::max<int64_t>(rows, 1));
  return std::max<int64_t>(ceil_div(rows, chunks), 1);
}

// ---- SwiGLU -------------------------------------------------------------------------------------
// Elementwise, one element per thread per stride; an output may be one of the inputs.

template <typename T>
__global__ void swiglu_forward_kernel(const T* gate, const T* up, T* out, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float gv = to_float(gate[i]);
    const float silu = gv / (1.0f + expf(-gv));
    out[i] = from_float<T>(silu * to_float(up[i]));
  }
}

// silu'(x) = s * (1 + x * (1 - s)), written as ATen's silu_backward writes it; dup uses silu as
// the forward computes it.
template <typename T>
__global__ void swiglu_backward_kernel(const T* g, const T* gate, const T* up, T* dgate, T* dup, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float gv = to_float(gate[i]);
    const float uv = to_float(up[i]);
    const float gr = to_float(g[i]);
    const float denominator = 1.0f + expf(-gv);
    const float s = 1.0f / denominator;
    const float silu = gv / denominator;
    dgate[i] = from_float<T>(gr * uv * s * (1.0f + gv * (1.0f - s)));
    dup[i] = from_float<T>(gr * silu);
  }
}

// ---- Rotary -------------------------------------------------------------------------------------

// One block per token (batch row b, position t); each thread takes pairs (i, i + half) of a
// head of q or k, reading both before writing both, so the output may be the input. The table
// entries are rounded to x's dtype first, as the unfused path casts cos and sin to it.
template <typename T>
__global__ void rotary_kernel(const T* q, const T* k, const float* __restrict__ cos_table,
                              const float* __restrict__ sin_table, T* q_out, T* k_out, int64_t tokens, int q_heads,
                              int k_heads, int half, bool inverse) {
  const int64_t token = blockIdx.x;  // b * tokens + t
  const int64_t d = 2 * static_cast<int64_t>(half);
  const float* cr = cos_table + (token % tokens) * d;
  const float* sr = sin_table + (token % tokens) * d;
  const int pairs = (q_heads + k_heads) * half;
  for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
    const int head = p / half, i = p % half;
    const T* src;
    T* dst;
    if (head < q_heads) {
      src = q + (token * q_heads + head) * d;
      dst = q_out + (token * q_heads + head) * d;
    } else {
      src = k + (token * k_heads + head - q_heads) * d;
      dst = k_out + (token * k_heads + head - q_heads) * d;
    }
    const float c1 = round_to<T>(cr[i]), c2 = round_to<T>(cr[i + half]);
    const float s1 = round_to<T>(sr[i]), s2 = round_to<T>(sr[i + half]);
    const float x1 = to_float(src[i]), x2 = to_float(src[i + half]);
    float o1, o2;
    if (inverse) {  // the transposed rotation: the gradient of the forward one
      o1 = x1 * c1 + x2 * s2;
      o2 = x2 * c2 - x1 * s1;
    } else {
      o1 = x1 * c1 - x2 * s1;
      o2 = x2 * c2 + x1 * s2;
    }
    dst[i] = from_float<T>(o1);
    dst[i + half] = from_float<T>(o2);
  }
}

// ---- AdamW --------------------------------------------------------------------------------------

// torch.optim.AdamW's update, operation by operation (optim/adamw.cpp), in one pass.
__global__ void adamw_kernel(float* __restrict__ param, const float* __restrict__ grad, float* __restrict__ exp_avg,
                             float* __restrict__ exp_avg_sq, int64_t n, AdamWScalars s) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float gr = grad[i];
    const float p = param[i] * s.decay;
    const float m = exp_avg[i] * s.beta1 + s.one_minus_beta1 * gr;
    const float v = exp_avg_sq[i] * s.beta2 + s.one_minus_beta2 * gr * gr;
    const float denominator = sqrtf(v) / s.bias_correction2_sqrt + s.eps;
    param[i] = p + s.neg_step_size * (m / denominator);
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
  }
}

template <typename T>
struct Tag {
  using type = T;
};

// Calls f(Tag<element type>) for dtype.
template <typename F>
void dispatch(KernelDtype dtype, F&& f) {
  switch (dtype) {
    case KernelDtype::f32:
      f(Tag<float>{});
      break;
    case KernelDtype::bf16:
      f(Tag<__nv_bfloat16>{});
      break;
    case KernelDtype::f16:
      f(Tag<__half>{});
      break;
  }
}

}  // namespace

void launch_rms_norm_forward(KernelDtype dtype, const void* x, const void* w, void* y, float* rstd, int64_t rows,
                             int64_t d, float eps, cudaStream_t stream) {
  if (rows == 0) return;
  dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    rms_norm_forward_kernel<T><<<static_cast<unsigned>(rows), row_threads(d), 0, stream>>>(
        static_cast<const T*>(x), static_cast<const T*>(w), static_cast<T*>(y), rstd, d, eps);
  });
}

int64_t rms_norm_backward_chunks(int64_t rows, int64_t d) {
  return rows == 0 ? 0 : ceil_div(rows, rms_norm_backward_rows_per_chunk(rows, d));
}

void launch_rms_norm_backward(KernelDtype dtype, const void* g, const void* x, const void* w, const float* rstd,
                              void* dx, float* dw, float* row_scale, double* dw_partial, int64_t rows, int64_t d,
                              cudaStream_t stream) {
  if (rows == 0) {
    cudaMemsetAsync(dw, 0, static_cast<size_t>(d) * sizeof(float), stream);
    return;
  }
  const int64_t rows_per_chunk = rms_norm_backward_rows_per_chunk(rows, d);
  const int64_t chunks = ceil_div(rows, rows_per_chunk);
  const dim3 tiles_grid(static_cast<unsigned>(chunks), static_cast<unsigned>(ceil_div(d, kThreads)));
  dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto* gt = static_cast<const T*>(g);
    const auto* xt = static_cast<const T*>(x);
    const auto* wt = static_cast<const T*>(w);
    rms_norm_row_scale_kernel<T><<<static_cast<unsigned>(rows), row_threads(d), 0, stream>>>(gt, xt, wt, rstd,
                                                                                          row_scale, d);
    rms_norm_backward_kernel<T><<<tiles_grid, kThreads, 0, stream>>>(gt, xt, wt, rstd, row_scale, static_cast<T*>(dx),
                                                                      dw_partial, rows, d, rows_per_chunk);
  });
  rms_norm_dw_kernel<<<static_cast<unsigned>(ceil_div(d, kThreads)), kThreads, 0, stream>>>(dw_partial, dw, chunks, d);
}

void launch_swiglu_forward(KernelDtype dtype, const void* gate, const void* up, void* out, int64_t n,
                           cudaStream_t stream) {
  if (n == 0) return;
  dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    swiglu_forward_kernel<T><<<elementwise_blocks(n), kThreads, 0, stream>>>(
        static_cast<const T*>(gate), static_cast<const T*>(up), static_cast<T*>(out), n);
  });
}

void launch_swiglu_backward(KernelDtype dtype, const void* g, const void* gate, const void* up, void* dgate,
                            void* dup, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    swiglu_backward_kernel<T><<<elementwise_blocks(n), kThreads, 0, stream>>>(
        static_cast<const T*>(g), static_cast<const T*>(gate), static_cast<const T*>(up), static_cast<T*>(dgate),
        static_cast<T*>(dup), n);
  });
}

void launch_rotary_qk(KernelDtype dtype, const void* q, const void* k, const float* cos, const float* sin,
                      void* q_out, void* k_out, int64_t batch, int64_t tokens, int64_t q_heads, int64_t k_heads,
                      int64_t head_dim, bool inverse, cudaStream_t stream) {
  const int64_t token_rows = batch * tokens;
  const int64_t pairs = (q_heads + k_heads) * (head_dim / 2);
  if (token_rows == 0 || pairs == 0) return;
  const int threads = static_cast<int>(std::min<int64_t>(ceil_div(pairs, 32) * 32, kThreads));
  dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    rotary_kernel<T><<<static_cast<unsigned>(token_rows), threads, 0, stream>>>(
        static_cast<const T*>(q), static_cast<const T*>(k), cos, sin, static_cast<T*>(q_out), static_cast<T*>(k_out),
        tokens, static_cast<int>(q_heads), static_cast<int>(k_heads), static_cast<int>(head_dim / 2), inverse);
  });
}

void launch_adamw_step(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
                       const AdamWScalars& scalars, cudaStream_t stream) {
  if (n == 0) return;
  adamw_kernel<<<elementwise_blocks(n), kThreads, 0, stream>>>(param, grad, exp_avg, exp_avg_sq, n, scalars);
}

}  // namespace xtrain::model::cuda
