// The fused elementwise kernels on CUDA tensors: the CUDA counterparts of the CPU fused RMSNorm,
// SwiGLU and rotary kernels, and a one-pass AdamW step. Defined by fused_kernels_cuda.cpp in CUDA
// builds and by model/kernels/fused_kernels_absent.cpp (each throws) otherwise.
// Every tensor is a contiguous CUDA tensor on one device, fp32, bf16 or fp16 (one dtype per call)
// unless stated; outputs are allocated by the caller. Kernels run on the current stream. The
// arithmetic is fp32 and each output is rounded once to its dtype, except where the unfused
// ops round in between and the kernel follows them (RMSNorm's normalised row, the rotary
// tables). Results do not depend on the GPU model or on timing: sums run in a fixed order.
// rows = x.numel() / x.size(-1), d = x.size(-1).
#pragma once
#include <cstdint>

#include <ATen/core/Tensor.h>

namespace xtrain::model::cuda {

using at::Tensor;

// RMSNorm: r = 1 / sqrt(mean(x^2) + eps) per row (fp32 block-tree sum) into rstd (fp32 [rows]);
// y = round(w * round(x * r)), as the unfused path rounds the normalised row to x's dtype before
// w multiplies it. w: [d], x's dtype. y: x's shape and dtype.
void rms_norm_forward(const Tensor& x, const Tensor& w, double eps, const Tensor& y, const Tensor& rstd);

// Its backward from rstd (nothing else saved): with n = x * r,
// dx = r * (g*w - n * mean(g*w*n)), in x's dtype; dw (fp32 [d], the caller casts) = the sum
// over rows of g * round(n) (the forward's rounded row), accumulated in fp64 over fixed blocks
// of rows and then over the blocks in order, so it is bit-identical from call to call.
void rms_norm_backward(const Tensor& g, const Tensor& x, const Tensor& w, const Tensor& rstd, const Tensor& dx,
                       const Tensor& dw);

// SwiGLU's product: out = silu(gate) * up, silu(x) = x / (1 + exp(-x)). out may be gate or up.
void swiglu_forward(const Tensor& gate, const Tensor& up, const Tensor& out);

// Its backward, recomputing s = sigmoid(gate): dup = g * silu(gate),
// dgate = g * up * s * (1 + gate * (1 - s)). Outputs may be inputs.
void swiglu_backward(const Tensor& g, const Tensor& gate, const Tensor& up, const Tensor& dgate, const Tensor& dup);

// Rotary embedding of q: [B, T, Hq, D] and k: [B, T, Hk, D] in one launch, in Hugging Face's
// rotate_half convention; cos, sin: fp32 [T, D], row t for token t of every batch row; D even,
// half = D / 2. For i < half: out[i] = x[i]c[i] - x[i+half]s[i]; for i >= half:
// out[i] = x[i]c[i] + x[i-half]s[i]. inverse applies the transposed map (the backward, dx from
// dout): dx[i] = g[i]c[i] + g[i+half]s[i+half], dx[i+half] = g[i+half]c[i+half] - g[i]s[i].
// c and s are rounded to x's dtype first (the unfused path casts the tables to it), the sums
// are fp32 and rounded once. q_out, k_out: q's and k's shapes and dtype; they may be q and k.
void rotary_qk(const Tensor& q, const Tensor& k, const Tensor& cos, const Tensor& sin, bool inverse,
               const Tensor& q_out, const Tensor& k_out);

// One AdamW step in place, fp32 tensors of one shape, with torch.optim.AdamW's arithmetic:
// p *= 1 - lr*wd; m = m*b1 + g*(1-b1); v = v*b2 + g*g*(1-b2);
// p += -(lr / (1 - b1^step)) * m / (sqrt(v) / sqrt(1 - b2^step) + eps); step counts from 1.
void adamw_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq, double lr,
                double beta1, double beta2, double eps, double weight_decay, int64_t step);

}  // namespace xtrain::model::cuda
