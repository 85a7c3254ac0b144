// The fused rotary kernel against apply_rotary, the unfused ops: q and k rotated, and their
// gradients, the same bit for bit, on the heads of a projection's output (transposed views, as
// attention hands them over), on contiguous heads (after qwen3's q/k norms), with as many or fewer
// key heads than query heads and an odd half width; through an attention layer with the kernel on
// and off; and a comparison at 1e-6 shown to catch an error of 2e-6.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include "model/attention/attention.h"
#include "model/kernels/fused_kernels.h"
#include "model/kernels/fused_rotary.h"
#include "model/layers/rotary.h"
#include "tensor_compare.h"

using namespace xtrain;

namespace {

struct RotaryResult {
  torch::Tensor q, k, dq, dk;
};

template <class Rotate>
RotaryResult rotate_both(const Rotate& rotate, const torch::Tensor& q0, const torch::Tensor& k0,
                         const torch::Tensor& dq_out, const torch::Tensor& dk_out) {
  auto q = q0.detach().clone().requires_grad_(true), k = k0.detach().clone().requires_grad_(true);
  // The heads of [B, T, H, D] tensors, as attention splits its projections.
  const auto [rq, rk] = rotate(q.transpose(1, 2), k.transpose(1, 2));
  torch::autograd::backward({rq, rk}, {dq_out, dk_out});
  return {rq.detach(), rk.detach(), q.grad(), k.grad()};
}

}  // namespace

TEST_CASE("fused rotary gives apply_rotary's q, k and gradients bit for bit", "[kernels]") {
  struct Shape {
    int64_t batch, seq, q_heads, k_heads, head_dim;
  };
  for (const auto& s : {Shape{1, 1, 1, 1, 2}, Shape{2, 37, 8, 4, 64}, Shape{3, 9, 4, 4, 14}, Shape{1, 130, 6, 2, 32}}) {
    INFO("batch " << s.batch << ", seq " << s.seq << ", heads " << s.q_heads << "/" << s.k_heads << ", head_dim "
                  << s.head_dim);
    torch::manual_seed(s.seq);
    const auto tables = model::rotary_tables(s.seq + 5, s.head_dim, 10000.0);
    const auto cos = tables.cos.narrow(0, 5, s.seq), sin = tables.sin.narrow(0, 5, s.seq);  // positions 5..
    const auto q = torch::randn({s.batch, s.seq, s.q_heads, s.head_dim});
    const auto k = torch::randn({s.batch, s.seq, s.k_heads, s.head_dim});
    const auto dq = torch::randn({s.batch, s.q_heads, s.seq, s.head_dim});
    const auto dk = torch::randn({s.batch, s.k_heads, s.seq, s.head_dim});
    const auto unfused = rotate_both(
        [&](const auto& a, const auto& b) {
          return std::make_pair(model::apply_rotary(a, cos, sin), model::apply_rotary(b, cos, sin));
        },
        q, k, dq, dk);
    const auto transposed = rotate_both([&](const auto& a, const auto& b) { return model::fused_rotary(a, b, cos, sin); },
                                        q, k, dq, dk);
    const auto contiguous = rotate_both(
        [&](const auto& a, const auto& b) { return model::fused_rotary(a.contiguous(), b.contiguous(), cos, sin); }, q,
        k, dq, dk);
    for (const auto* fused : {&transposed, &contiguous}) {
      CHECK(torch::equal(fused->q, unfused.q));
      CHECK(torch::equal(fused->k, unfused.k));
      CHECK(torch::equal(fused->dq, unfused.dq));
      CHECK(torch::equal(fused->dk, unfused.dk));
    }
    CHECK(transposed.q.strides() == q.transpose(1, 2).strides());  // written where the input lies
    auto wrong = transposed.dq.clone();
    wrong.view(-1)[wrong.numel() / 2] += 2e-6 * unfused.dq.abs().max().item<float>();
    CHECK(testing::max_relative_error(wrong, unfused.dq) > 1e-6);
  }
}

TEST_CASE("fused rotary refuses what it does not compute", "[kernels]") {
  const auto cos = torch::ones({5, 8}), sin = torch::zeros({5, 8});
  const auto q = torch::randn({1, 2, 5, 8}), k = torch::randn({1, 1, 5, 8});
  CHECK(model::fused_rotary_applies(q, k, cos, sin));
  CHECK_FALSE(model::fused_rotary_applies(q.to(torch::kFloat64), k, cos, sin));
  CHECK_FALSE(model::fused_rotary_applies(q, k, cos.narrow(0, 0, 4), sin.narrow(0, 0, 4)));
  CHECK_FALSE(model::fused_rotary_applies(q.narrow(-1, 0, 7), k.narrow(-1, 0, 7), cos.narrow(1, 0, 7),
                                          sin.narrow(1, 0, 7)));
  CHECK_FALSE(model::fused_rotary_applies(q.transpose(2, 3), k, cos, sin));
  CHECK_THROWS_WITH(model::fused_rotary(q, k.narrow(2, 0, 4), cos, sin),
                    Catch::Contains("fused_rotary: q [B, Hq, T, D] and k [B, Hk, T, D] with even D"));
}
