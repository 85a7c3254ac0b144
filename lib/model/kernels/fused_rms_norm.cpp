#include "model/kernels/fused_rms_norm.h"

#include <torch/torch.h>

#include "model/kernels/fused_kernels.h"
#include "model/kernels/rms_norm_rows.h"
#include "model/kernels/cuda/fused_kernels_cuda.h"

namespace xtrain::model {
namespace {

int64_t norm_rows_of(const torch::Tensor& x) { return x.numel() / x.size(-1); }

// Into y and rstd: w * x * r, or with an addend a defined, h = x + a into h and w * h * r.
void normalize_on_cpu(const torch::Tensor& x, const torch::Tensor& a, const torch::Tensor& h, const torch::Tensor& w,
                      double eps, const torch::Tensor& y, const torch::Tensor& rstd) {
  rms_norm_rows(x.data_ptr<float>(), a.defined() ? a.data_ptr<float>() : nullptr,
                a.defined() ? h.data_ptr<float>() : nullptr, w.data_ptr<float>(), y.data_ptr<float>(),
                rstd.data_ptr<float>(), norm_rows_of(x), x.size(-1), eps);
}

// dx (plus dx_more when defined) into dx; returns dw in fp32, summed over fixed blocks of rows.
torch::Tensor normalize_backward_on_cpu(const torch::Tensor& g, const torch::Tensor& x, const torch::Tensor& w,
                                        const torch::Tensor& rstd, const torch::Tensor& dx_more,
                                        const torch::Tensor& dx) {
  const int64_t d = x.size(-1), rows = norm_rows_of(x);
  auto dw_blocks = torch::zeros({rms_norm_row_blocks(rows), d}, x.options().dtype(torch::kFloat64));
  rms_norm_rows_backward(g.data_ptr<float>(), x.data_ptr<float>(), w.data_ptr<float>(), rstd.data_ptr<float>(),
                         dx_more.defined() ? dx_more.data_ptr<float>() : nullptr, dx.data_ptr<float>(),
                         dw_blocks.data_ptr<double>(), rows, d);
  return dw_blocks.sum(0).to(torch::kFloat32);
}

class FusedRmsNorm : public torch::autograd::Function<FusedRmsNorm> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x_in,
                               const torch::Tensor& w_in, double eps) {
    const auto x = x_in.contiguous();
    const auto w = w_in.contiguous();
    auto y = torch::empty_like(x);
    auto rstd = torch::empty({norm_rows_of(x)}, x.options().dtype(torch::kFloat32));
    if (x.is_cuda())
      cuda::rms_norm_forward(x, w, eps, y, rstd);
    else
      normalize_on_cpu(x, {}, {}, w, eps, y, rstd);
    ctx->save_for_backward({x, w, rstd});
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& x = saved[0];
    const auto& w = saved[1];
    const auto& rstd = saved[2];
    const auto g = grads[0].contiguous();
    auto dx = torch::empty_like(x);
    if (x.is_cuda()) {
      auto dw = torch::empty({x.size(-1)}, x.options().dtype(torch::kFloat32));
      cuda::rms_norm_backward(g, x, w, rstd, dx, dw);
      return {dx, dw.to(w.scalar_type()), torch::Tensor()};
    }
    return {dx, normalize_backward_on_cpu(g, x, w, rstd, {}, dx), torch::Tensor()};
  }
};

// (h, y) = (x + a, rms_norm(x + a)): the residual stream's add and the norm after it in one pass.
// h is both an output and what backward reads; its gradient is the norm's plus h's own.
class FusedAddRmsNorm : public torch::autograd::Function<FusedAddRmsNorm> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x_in,
                                                const torch::Tensor& a_in, const torch::Tensor& w_in, double eps) {
    const auto x = x_in.contiguous(), a = a_in.contiguous(), w = w_in.contiguous();
    auto h = torch::empty_like(x), y = torch::empty_like(x);
    auto rstd = torch::empty({norm_rows_of(x)}, x.options());
    normalize_on_cpu(x, a, h, w, eps, y, rstd);
    ctx->save_for_backward({h, w, rstd});
    return {h, y};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& h = saved[0];
    const auto dh_own = grads[0].defined() ? grads[0].contiguous() : torch::Tensor();
    const auto dy = grads[1].defined() ? grads[1].contiguous() : torch::zeros_like(h);
    auto dh = torch::empty_like(h);
    auto dw = normalize_backward_on_cpu(dy, h, saved[1], saved[2], dh_own, dh);
    return {dh, dh, dw, torch::Tensor()};
  }
};

}  // namespace

bool fused_rms_norm_applies(const torch::Tensor& x, const torch::Tensor& w) {
  const bool shapes = x.dim() >= 1 && w.dim() == 1 && w.size(0) == x.size(-1);
  if (cuda_fused_kernel_takes(x))
    return shapes && w.device() == x.device() && w.scalar_type() == x.scalar_type();
  return x.device().is_cpu() && w.device().is_cpu() && x.scalar_type() == torch::kFloat32 &&
         w.scalar_type() == torch::kFloat32 && shapes;
}

torch::Tensor fused_rms_norm(const torch::Tensor& x, const torch::Tensor& w, double eps) {
  TORCH_CHECK(fused_rms_norm_applies(x, w),
              "fused_rms_norm: fp32 CPU tensors (or CUDA ones of one float dtype) with w of x's last size expected");
  return FusedRmsNorm::apply(x, w, eps);
}

bool fused_add_rms_norm_applies(const torch::Tensor& x, const torch::Tensor& a, const torch::Tensor& w) {
  return x.device().is_cpu() && fused_rms_norm_applies(x, w) && a.device().is_cpu() &&
         a.scalar_type() == torch::kFloat32 && a.sizes() == x.sizes();
}

std::pair<torch::Tensor, torch::Tensor> fused_add_rms_norm(const torch::Tensor& x, const torch::Tensor& a,
                                                           const torch::Tensor& w, double eps) {
  TORCH_CHECK(fused_add_rms_norm_applies(x, a, w),
              "fused_add_rms_norm: fp32 CPU x and a of one shape, w of their last size expected");
  auto outputs = FusedAddRmsNorm::apply(x, a, w, eps);
  return {outputs[0], outputs[1]};
}

}  // namespace xtrain::model
