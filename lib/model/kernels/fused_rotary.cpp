#include "model/kernels/fused_rotary.h"

#include <torch/torch.h>

#include "model/kernels/fused_kernels.h"
#include "model/kernels/rotary_rows.h"
#include "model/kernels/cuda/fused_kernels_cuda.h"

namespace xtrain::model {
namespace {

// The rows of t, a [B, H, T, D] tensor with its last dimension contiguous.
HeadRows head_rows(const torch::Tensor& t) {
  return {t.data_ptr<float>(), t.size(1), t.size(2), t.stride(0), t.stride(1), t.stride(2)};
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
    rotary_rows({head_rows(q), head_rows(k)}, {head_rows(q_out), head_rows(k_out)}, q.size(0), cos.data_ptr<float>(),
                sin.data_ptr<float>(), cos.size(1));
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
    rotary_rows_backward({head_rows(dq_out), head_rows(dk_out)}, {head_rows(dq), head_rows(dk)}, dq.size(0),
                         saved[0].data_ptr<float>(), saved[1].data_ptr<float>(), saved[0].size(1));
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
