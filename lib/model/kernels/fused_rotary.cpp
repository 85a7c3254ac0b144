#include "model/kernels/fused_rotary.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "util/cpu_kernel_support.h"
#include "model/kernels/fused_kernels.h"
#include "model/kernels/cuda/fused_kernels_cuda.h"

namespace xtrain::model {
namespace {

// out = x * c + rotate_half(x) * s, where rotate_half(x) = [-x2, x1] for the halves x1, x2.
XTRAIN_CPU_CLONES void rotate_row(const float* x, const float* c, const float* s, float* out, int64_t half) {
#pragma omp simd
  for (int64_t i = 0; i < half; ++i) out[i] = x[i] * c[i] + -x[i + half] * s[i];
#pragma omp simd
  for (int64_t i = half; i < 2 * half; ++i) out[i] = x[i] * c[i] + x[i - half] * s[i];
}

// The transpose: dx = g * c + rotate_half^T(g * s), rotate_half^T(y) = [y2, -y1].
XTRAIN_CPU_CLONES void rotate_row_back(const float* g, const float* c, const float* s, float* dx, int64_t half) {
#pragma omp simd
  for (int64_t i = 0; i < half; ++i) dx[i] = g[i] * c[i] + g[i + half] * s[i + half];
#pragma omp simd
  for (int64_t i = half; i < 2 * half; ++i) dx[i] = g[i] * c[i] + -(g[i - half] * s[i - half]);
}

// The rows of a [B, H, T, D] tensor, wherever its strides put them.
struct HeadRows {
  float* data;
  int64_t heads, seq, batch_stride, head_stride, seq_stride;

  explicit HeadRows(const torch::Tensor& t)
      : data(t.data_ptr<float>()), heads(t.size(1)), seq(t.size(2)), batch_stride(t.stride(0)),
        head_stride(t.stride(1)), seq_stride(t.stride(2)) {}
  int64_t count(int64_t batch) const { return batch * heads * seq; }
  int64_t position(int64_t row) const { return row % seq; }
  float* row(int64_t row) const {
    const int64_t t = row % seq, h = row / seq % heads, b = row / seq / heads;
    return data + b * batch_stride + h * head_stride + t * seq_stride;
  }
};

// Applies `rotate` to every row of q and then of k, from `in` into `out`, in one parallel loop.
template <class Rotate>
void rotate_rows(const HeadRows (&in)[2], const HeadRows (&out)[2], int64_t batch, const torch::Tensor& cos,
                 const torch::Tensor& sin, const Rotate& rotate) {
  const int64_t d = cos.size(1), q_rows = in[0].count(batch);
  const float *c = cos.data_ptr<float>(), *s = sin.data_ptr<float>();
  at::parallel_for(0, q_rows + in[1].count(batch), cpu::grain_in_rows(d), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int which = r < q_rows ? 0 : 1;
      const int64_t row = which == 0 ? r : r - q_rows, t = in[which].position(row);
      rotate(in[which].row(row), c + t * d, s + t * d, out[which].row(row), d / 2);
    }
  });
}

// The CUDA kernel takes the [B, T, H, D] layout of the projections; heads are [B, H, T, D] views.
torch::autograd::variable_list rotate_on_cuda(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& cos,
                                              const torch::Tensor& sin, bool inverse) {
  const auto tokens_first = [](const torch::Tensor& t) { return t.transpose(1, 2).contiguous(); };
  const auto q_rows = tokens_first(q), k_rows = tokens_first(k);
  auto q_out = torch::empty_like(q_rows), k_out = torch::empty_like(k_rows);
  cuda::rotary_qk(q_rows, k_rows, cos, sin, inverse, q_out, k_out);
  return {q_out.transpose(1, 2), k_out.transpose(1, 2)};
}

class FusedRotary : public torch::autograd::Function<FusedRotary> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& q,
                                                const torch::Tensor& k, const torch::Tensor& cos_in,
                                                const torch::Tensor& sin_in) {
    const auto cos = cos_in.contiguous(), sin = sin_in.contiguous();
    ctx->save_for_backward({cos, sin});
    if (q.is_cuda()) return rotate_on_cuda(q, k, cos, sin, /*inverse=*/false);
    auto q_out = torch::empty_like(q), k_out = torch::empty_like(k);
    rotate_rows({HeadRows(q), HeadRows(k)}, {HeadRows(q_out), HeadRows(k_out)}, q.size(0), cos, sin, rotate_row);
    return {q_out, k_out};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    if (grads[0].is_cuda()) {
      auto rotated = rotate_on_cuda(grads[0], grads[1], saved[0], saved[1], /*inverse=*/true);
      return {rotated[0], rotated[1], torch::Tensor(), torch::Tensor()};
    }
    const auto dq_out = with_last_dim_contiguous(grads[0]), dk_out = with_last_dim_contiguous(grads[1]);
    auto dq = torch::empty_like(dq_out), dk = torch::empty_like(dk_out);
    rotate_rows({HeadRows(dq_out), HeadRows(dk_out)}, {HeadRows(dq), HeadRows(dk)}, dq.size(0), saved[0], saved[1],
                rotate_row_back);
    return {dq, dk, torch::Tensor(), torch::Tensor()};
  }

 private:
  static torch::Tensor with_last_dim_contiguous(const torch::Tensor& t) {
    return t.stride(-1) == 1 ? t : t.contiguous();
  }
};

bool rows_of_four_dims(const torch::Tensor& t) { return t.dim() == 4 && t.stride(-1) == 1 && t.size(-1) % 2 == 0; }

}  // namespace

bool fused_rotary_applies(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& cos,
                          const torch::Tensor& sin) {
  if (cuda_fused_kernel_takes(q)) {
    if (k.device() != q.device() || k.scalar_type() != q.scalar_type()) return false;
    for (const auto* table : {&cos, &sin})
      if (table->device() != q.device() || table->scalar_type() != torch::kFloat32) return false;
  } else {
    for (const auto* t : {&q, &k, &cos, &sin})
      if (!t->device().is_cpu() || t->scalar_type() != torch::kFloat32) return false;
  }
  return rows_of_four_dims(q) && rows_of_four_dims(k) && q.size(0) == k.size(0) && q.size(2) == k.size(2) &&
         q.size(3) == k.size(3) && cos.dim() == 2 && cos.sizes() == sin.sizes() && cos.size(0) == q.size(2) &&
         cos.size(1) == q.size(3);
}

std::pair<torch::Tensor, torch::Tensor> fused_rotary(const torch::Tensor& q, const torch::Tensor& k,
                                                     const torch::Tensor& cos, const torch::Tensor& sin) {
  TORCH_CHECK(fused_rotary_applies(q, k, cos, sin),
              "fused_rotary: q [B, Hq, T, D] and k [B, Hk, T, D] with even D (fp32 on the CPU, or one float dtype on "
              "CUDA), fp32 cos and sin [T, D] expected");
  auto rotated = FusedRotary::apply(q, k, cos, sin);
  return {rotated[0], rotated[1]};
}

}  // namespace xtrain::model
