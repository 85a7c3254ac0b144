// Tests of the CUDA paths. They need a CUDA device: without one the executable prints why and
// exits 77, which ctest reports as skipped (tests/CMakeLists.txt registers each case by name).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>
#include <vector>

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#include <torch/torch.h>

#include "parallel/context_parallel.h"
#include "parallel/process_groups.h"
#include "parallel/thread_comm.h"
#include "parallel/ulysses_attention.h"
#include "parallel/shard_unit.h"
#include "memory/activation_offload.h"
#include "model/attention/blockwise_attention.h"
#include "model/layers/float8_linear.h"
#include "model/kernel_choice.h"
#include "model/llama.h"
#include "model/layers/rotary.h"
#include "model/kernels/cuda/fused_kernels_cuda.h"
#include "model/attention/sdpa_attention.h"
#include "optim/adamw.h"

using namespace xtrain;

namespace {

const torch::Device kCuda(torch::kCUDA, 0);

std::shared_ptr<parallel::Comm> one_rank_nccl(const std::string& name) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = std::chrono::seconds(60);
  auto backend = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, 0, 1, options);
  return parallel::make_backend_comm(backend, name, {0}, std::chrono::seconds(60));
}

double relative_error(const torch::Tensor& actual, const torch::Tensor& expected) {
  auto a = actual.to(torch::kCPU, torch::kFloat64), e = expected.to(torch::kCPU, torch::kFloat64);
  return (a - e).abs().max().item<double>() / std::max(e.abs().max().item<double>(), 1e-30);
}

// The fused CUDA kernels against the unfused ops. fp32: 1e-6 (about 8 units in the last place),
// the kernels and the ops differing only in summation order, fused multiply-adds and rsqrt's last
// bits. bf16 and fp16: where the unfused ops round two or three times (a product, then a sum or
// another product), the kernels round once; each rounding moves a value by at most half a unit
// in its last place, so the outputs differ by at most about 1.5 units of the largest output,
// 1.5 eps relative to it (eps = 2^-7 for bf16, 2^-10 for fp16). The same arithmetic emulated in
// fp32 on the CPU stays within 1 eps on these shapes; 2 eps leaves the margin.
const std::array<torch::ScalarType, 3> kKernelDtypes{torch::kFloat32, torch::kBFloat16, torch::kHalf};

double kernel_tolerance(torch::ScalarType dtype) {
  switch (dtype) {
    case torch::kBFloat16:
      return 2 * std::ldexp(1.0, -7);
    case torch::kHalf:
      return 2 * std::ldexp(1.0, -10);
    default:
      return 1e-6;
  }
}

// The unfused ops, as model/layers/rms_norm.cpp, model/layers/swiglu.cpp and model/layers/rotary.cpp compose them.
torch::Tensor unfused_rms_norm(const torch::Tensor& x, const torch::Tensor& w, double eps) {
  auto wide = x.to(at::promote_types(x.scalar_type(), torch::kFloat32));
  auto normed = wide * torch::rsqrt(wide.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return w * normed.to(x.scalar_type());
}

torch::Tensor rotate_half(const torch::Tensor& x) {
  auto halves = x.chunk(2, -1);
  return torch::cat({-halves[1], halves[0]}, -1);
}

// x: [B, T, heads, D]; cos, sin: [T, D], broadcast over batch rows and heads.
torch::Tensor unfused_rotary(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  auto c = cos.to(x.scalar_type()).unsqueeze(1);
  auto s = sin.to(x.scalar_type()).unsqueeze(1);
  return x * c + rotate_half(x) * s;
}

torch::Tensor random_on_gpu(at::IntArrayRef shape, torch::ScalarType dtype, double scale = 1.0) {
  return (torch::randn(shape, torch::TensorOptions().device(kCuda)) * scale).to(dtype);
}

}  // namespace

TEST_CASE("NCCL all-reduce, all-gather and reduce-scatter on one rank", "[gpu][nccl]") {
  auto comm = one_rank_nccl("nccl");
  auto t = torch::arange(8, torch::TensorOptions().dtype(torch::kFloat32).device(kCuda));
  comm->all_reduce_sum(t).wait();
  CHECK(torch::equal(t.cpu(), torch::arange(8, torch::kFloat32)));
  auto out = torch::empty({8}, t.options());
  comm->all_gather(out, t * 2).wait();
  CHECK(torch::equal(out.cpu(), torch::arange(8, torch::kFloat32) * 2));
  auto reduced = torch::empty({8}, t.options());
  comm->reduce_scatter_sum(reduced, t + 1).wait();
  CHECK(torch::equal(reduced.cpu(), torch::arange(8, torch::kFloat32) + 1));
  auto scalar = torch::tensor({3.5}, torch::TensorOptions().dtype(torch::kFloat64).device(kCuda));
  comm->all_reduce_sum(scalar).wait();
  CHECK(scalar.item<double>() == 3.5);
}

// The gather must see what the compute stream wrote before it, even when that work is still
// queued: the backend orders its stream after the compute stream.
TEST_CASE("an FSDP gather is ordered after the compute stream's writes", "[gpu][fsdp]") {
  auto comm = one_rank_nccl("fsdp");
  auto weight = torch::zeros({1 << 20}, torch::TensorOptions().dtype(torch::kFloat32).device(kCuda));
  weight.requires_grad_(true);
  parallel::ShardUnit unit("u", {{"w", weight}}, comm, parallel::make_single_process_comm("dp"));
  torch::NoGradGuard no_grad;
  auto big = torch::randn({4096, 4096}, weight.options());
  for (int i = 0; i < 8; ++i) big = torch::mm(big, big).div_(64.0);  // keeps the stream busy
  unit.parameters()[0].local.copy_(big.reshape(-1).narrow(0, 0, 1 << 20));
  unit.start_gather();
  unit.wait_gather();
  CHECK(torch::equal(weight.cpu(), big.reshape(-1).narrow(0, 0, 1 << 20).cpu()));
}

TEST_CASE("activation offload round trip through pinned memory on a side stream", "[gpu][offload]") {
  memory::ActivationOffloader offloader;
  offloader.begin_forward();
  std::vector<torch::Tensor> originals;
  std::vector<int64_t> slots;
  for (int i = 0; i < 4; ++i) {
    auto t = torch::randn({256, 1024}, torch::TensorOptions().device(kCuda));
    originals.push_back(t.cpu());
    slots.push_back(offloader.offload(t));
    t.fill_(-1);  // the device copy is overwritten at once: the offload must have read it first
  }
  auto scratch = torch::randn({4, 256, 1024}, torch::TensorOptions().device(kCuda));  // reuses freed blocks
  for (int i = 3; i >= 0; --i) {
    auto back = offloader.fetch(slots[i]);
    CHECK(back.is_cuda());
    CHECK(torch::equal(back.cpu(), originals[i]));
  }
  CHECK(offloader.resident_slots() == 0);
}

TEST_CASE("SDPA and varlen flash agree with the blockwise kernel", "[gpu][attention]") {
  torch::manual_seed(3);
  for (auto dtype : {torch::kFloat32, torch::kBFloat16}) {
    INFO("dtype " << dtype);
    const double tolerance = dtype == torch::kFloat32 ? 2e-5 : 2e-2;
    auto options = torch::TensorOptions().dtype(dtype).device(kCuda);
    auto q = torch::randn({2, 8, 512, 64}, options).requires_grad_(true);
    auto k = torch::randn({2, 2, 512, 64}, options).requires_grad_(true);
    auto v = torch::randn({2, 2, 512, 64}, options).requires_grad_(true);
    for (const auto& cu : {torch::Tensor(), torch::tensor({0, 100, 100, 350, 512}, torch::kInt64)}) {
      INFO("packed " << cu.defined());
      auto expected = model::blockwise_causal_attention(q, k, v, cu, 128);
      auto grads_expected = torch::autograd::grad({expected.sum()}, {q, k, v});
      auto actual = model::sdpa_causal_attention(q, k, v, cu, 128);
      auto grads_actual = torch::autograd::grad({actual.sum()}, {q, k, v});
      CHECK(relative_error(actual, expected) < tolerance);
      for (int i = 0; i < 3; ++i) CHECK(relative_error(grads_actual[i], grads_expected[i]) < tolerance);
    }
  }
}

// The variants the CUDA paths take themselves (SDPA and varlen flash: the scale; varlen flash:
// the window) and the ones they hand to the blockwise kernel (sinks; a window on one sequence),
// in bf16, against the blockwise kernel with the same variant.
TEST_CASE("SDPA and varlen flash with attention variants agree with the blockwise kernel", "[gpu][attention]") {
  torch::manual_seed(4);
  auto options = torch::TensorOptions().dtype(torch::kBFloat16).device(kCuda);
  auto q = torch::randn({2, 8, 512, 64}, options).requires_grad_(true);
  auto k = torch::randn({2, 2, 512, 64}, options).requires_grad_(true);
  auto v = torch::randn({2, 2, 512, 64}, options).requires_grad_(true);
  auto sinks = torch::randn({8}, torch::TensorOptions().device(kCuda)).requires_grad_(true);
  const std::vector<model::AttentionVariant> variants{{0.2, 0, {}}, {0, 100, {}}, {0.2, 100, {}}, {0, 0, sinks}};
  for (const auto& variant : variants) {
    const std::vector<torch::Tensor> leaves =
        variant.has_sinks() ? std::vector<torch::Tensor>{q, k, v, sinks} : std::vector<torch::Tensor>{q, k, v};
    for (const auto& cu : {torch::Tensor(), torch::tensor({0, 100, 100, 350, 512}, torch::kInt64)}) {
      INFO("scale " << variant.scale << ", window " << variant.window << ", sinks " << variant.has_sinks()
                    << ", packed " << cu.defined());
      auto expected = model::blockwise_causal_attention(q, k, v, cu, 128, variant);
      auto grads_expected = torch::autograd::grad({expected.sum()}, leaves);
      auto actual = model::sdpa_causal_attention(q, k, v, cu, 128, variant);
      auto grads_actual = torch::autograd::grad({actual.sum()}, leaves);
      CHECK(relative_error(actual, expected) < 2e-2);
      for (size_t i = 0; i < leaves.size(); ++i) CHECK(relative_error(grads_actual[i], grads_expected[i]) < 2e-2);
    }
  }
}

// The ring's flash block pairs with a scale and sinks (merged once, after the last step) over 2
// in-process ranks, against the blockwise kernel over the whole row; the ranks' sink gradients
// sum to the whole row's.
TEST_CASE("ring attention's flash pairs take the scale and the sinks", "[gpu][context]") {
  torch::manual_seed(6);
  constexpr int64_t kRanks = 2, kSeq = 512;
  auto options = torch::TensorOptions().dtype(torch::kBFloat16).device(kCuda);
  const auto q = torch::randn({1, 8, kSeq, 64}, options), k = torch::randn({1, 4, kSeq, 64}, options),
             v = torch::randn({1, 4, kSeq, 64}, options);
  const auto sinks = torch::randn({8}, torch::TensorOptions().device(kCuda));
  auto leaf = [](const torch::Tensor& t) { return t.clone().requires_grad_(true); };
  const auto qr = leaf(q), kr = leaf(k), vr = leaf(v), sr = leaf(sinks);
  const auto expected = model::blockwise_causal_attention(qr, kr, vr, {}, 128, {0.2, 0, sr});
  const auto grads_expected = torch::autograd::grad({expected.sum()}, {qr, kr, vr, sr});
  const auto comms = parallel::make_thread_comms(kRanks, "cp");
  std::vector<double> worst(kRanks, 0.0);
  std::vector<torch::Tensor> sink_grads(kRanks);
  std::vector<std::string> errors(kRanks);
  std::vector<std::thread> ranks;
  for (int64_t r = 0; r < kRanks; ++r)
    ranks.emplace_back([&, r] {
      try {
        c10::cuda::set_device(0);
        const auto shard = parallel::plan_context_shard(kSeq, {}, kRanks, r, true);
        const auto mine = shard->row_index(r).to(kCuda);
        const auto layout = model::context_layout(model::SequenceLayout{}, shard, kCuda);
        auto part = [&](const torch::Tensor& t) { return t.index_select(2, mine).detach().requires_grad_(true); };
        auto ql = part(q), kl = part(k), vl = part(v), sl = leaf(sinks);
        const auto out = parallel::ring_attention(comms[static_cast<size_t>(r)], ql, kl, vl, layout, {0.2, 0, sl}, 128);
        const auto grads = torch::autograd::grad({out.sum()}, {ql, kl, vl, sl});
        double& w = worst[static_cast<size_t>(r)];
        w = relative_error(out, expected.index_select(2, mine));
        for (int i = 0; i < 3; ++i) w = std::max(w, relative_error(grads[i], grads_expected[i].index_select(2, mine)));
        sink_grads[static_cast<size_t>(r)] = grads[3];
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : ranks) t.join();
  REQUIRE(errors == std::vector<std::string>(kRanks, ""));
  CHECK(*std::max_element(worst.begin(), worst.end()) < 2e-2);
  CHECK(relative_error(sink_grads[0] + sink_grads[1], grads_expected[3]) < 2e-2);
}

// Ring and Ulysses attention on CUDA tensors over 2 in-process ranks: each rank's output and
// gradients equal the whole row's rows, the ring's block exchange and online softmax and the
// Ulysses all-to-alls running on the device.
TEST_CASE("ring and Ulysses attention on CUDA match attention over the whole row", "[gpu][context]") {
  torch::manual_seed(5);
  constexpr int64_t kRanks = 2, kSeq = 512;
  for (auto dtype : {torch::kFloat32, torch::kBFloat16}) {
    const double tolerance = dtype == torch::kFloat32 ? 2e-5 : 2e-2;
    auto options = torch::TensorOptions().dtype(dtype).device(kCuda);
    const auto q = torch::randn({1, 8, kSeq, 64}, options), k = torch::randn({1, 4, kSeq, 64}, options),
               v = torch::randn({1, 4, kSeq, 64}, options);
    for (const auto& bounds : {std::vector<int64_t>{}, std::vector<int64_t>{0, 100, 100, 350, kSeq}}) {
      const auto cu = bounds.empty() ? torch::Tensor() : torch::tensor(bounds, torch::kInt64);
      const auto qr = q.clone().requires_grad_(true), kr = k.clone().requires_grad_(true),
                 vr = v.clone().requires_grad_(true);
      const auto expected = model::blockwise_causal_attention(qr, kr, vr, cu, 128);
      const auto grads_expected = torch::autograd::grad({expected.sum()}, {qr, kr, vr});
      for (auto kind : {parallel::ContextKind::ring, parallel::ContextKind::ulysses}) {
        INFO("dtype " << dtype << ", packed " << cu.defined() << ", " << to_string(kind));
        const auto comms = parallel::make_thread_comms(kRanks, "cp");
        std::vector<double> worst(kRanks, 0.0);
        std::vector<std::string> errors(kRanks);
        std::vector<std::thread> ranks;
        for (int64_t r = 0; r < kRanks; ++r)
          ranks.emplace_back([&, r] {
            try {
              c10::cuda::set_device(0);
              const auto shard = parallel::plan_context_shard(kSeq, bounds, kRanks, r, true);
              const auto mine = shard->row_index(r).to(kCuda);
              const auto layout = model::context_layout(cu.defined() ? model::packed_layout(cu, kCuda)
                                                                     : model::SequenceLayout{},
                                                        shard, kCuda);
              auto part = [&](const torch::Tensor& t) { return t.index_select(2, mine).detach().requires_grad_(true); };
              auto ql = part(q), kl = part(k), vl = part(v);
              const auto& comm = comms[static_cast<size_t>(r)];
              const auto out = kind == parallel::ContextKind::ring
                                   ? parallel::ring_attention(comm, ql, kl, vl, layout, {}, 128)
                                   : parallel::ulysses_attention(comm, {}, ql, kl, vl, layout);
              const auto grads = torch::autograd::grad({out.sum()}, {ql, kl, vl});
              worst[static_cast<size_t>(r)] = relative_error(out, expected.index_select(2, mine));
              for (int i = 0; i < 3; ++i)
                worst[static_cast<size_t>(r)] = std::max(
                    worst[static_cast<size_t>(r)], relative_error(grads[i], grads_expected[i].index_select(2, mine)));
            } catch (const std::exception& e) {
              errors[static_cast<size_t>(r)] = e.what();
            }
          });
        for (auto& t : ranks) t.join();
        CHECK(errors == std::vector<std::string>(kRanks, ""));
        CHECK(*std::max_element(worst.begin(), worst.end()) < tolerance);
      }
    }
  }
}

TEST_CASE("the fused RMSNorm kernels match the unfused ops forward and backward", "[gpu][kernels]") {
  torch::manual_seed(11);
  const double eps = 1e-6;
  const std::vector<std::vector<int64_t>> shapes{{1, 100}, {7, 100}, {3, 5, 33}, {513, 1000}, {64, 4096}};
  for (auto dtype : kKernelDtypes) {
    for (const auto& shape : shapes) {
      INFO("dtype " << dtype << ", shape " << at::IntArrayRef(shape));
      const double tolerance = kernel_tolerance(dtype);
      auto x = random_on_gpu(shape, dtype);
      const int64_t d = x.size(-1), rows = x.numel() / d;
      auto w = (1 + random_on_gpu({d}, torch::kFloat32, 0.1)).to(dtype);
      auto g = random_on_gpu(shape, dtype);
      auto x_ref = x.clone().requires_grad_(true), w_ref = w.clone().requires_grad_(true);
      auto y_ref = unfused_rms_norm(x_ref, w_ref, eps);
      auto grads_ref = torch::autograd::grad({y_ref}, {x_ref, w_ref}, {g});
      auto rstd_ref = torch::rsqrt(x.to(torch::kFloat32).pow(2).mean(-1) + eps).reshape({-1});

      auto y = torch::empty_like(x);
      auto rstd = torch::empty({rows}, x.options().dtype(torch::kFloat32));
      model::cuda::rms_norm_forward(x, w, eps, y, rstd);
      CHECK(relative_error(y, y_ref) < tolerance);
      CHECK(relative_error(rstd, rstd_ref) < 1e-6);

      auto dx = torch::empty_like(x);
      auto dw = torch::empty({d}, x.options().dtype(torch::kFloat32));
      model::cuda::rms_norm_backward(g, x, w, rstd, dx, dw);
      CHECK(relative_error(dx, grads_ref[0]) < tolerance);
      CHECK(relative_error(dw, grads_ref[1]) < tolerance);
    }
  }
}

TEST_CASE("the fused RMSNorm backward gives the same bits on every call", "[gpu][kernels]") {
  torch::manual_seed(12);
  for (auto dtype : kKernelDtypes) {
    INFO("dtype " << dtype);
    auto x = random_on_gpu({4096, 1000}, dtype), g = random_on_gpu({4096, 1000}, dtype);
    auto w = (1 + random_on_gpu({1000}, torch::kFloat32, 0.1)).to(dtype);
    auto y = torch::empty_like(x);
    auto rstd = torch::empty({4096}, x.options().dtype(torch::kFloat32));
    model::cuda::rms_norm_forward(x, w, 1e-6, y, rstd);
    std::vector<torch::Tensor> dx, dw;
    for (int call = 0; call < 2; ++call) {
      dx.push_back(torch::empty_like(x));
      dw.push_back(torch::empty({1000}, x.options().dtype(torch::kFloat32)));
      model::cuda::rms_norm_backward(g, x, w, rstd, dx.back(), dw.back());
    }
    CHECK(torch::equal(dw[0], dw[1]));
    CHECK(torch::equal(dx[0], dx[1]));
  }
}

TEST_CASE("the fused SwiGLU kernels match silu(gate) * up and its gradients", "[gpu][kernels]") {
  torch::manual_seed(13);
  const std::vector<std::vector<int64_t>> shapes{{1, 100}, {7, 33}, {64, 1000}, {4, 8, 300}};
  for (auto dtype : kKernelDtypes) {
    for (const auto& shape : shapes) {
      INFO("dtype " << dtype << ", shape " << at::IntArrayRef(shape));
      const double tolerance = kernel_tolerance(dtype);
      auto gate = random_on_gpu(shape, dtype, 3.0), up = random_on_gpu(shape, dtype), g = random_on_gpu(shape, dtype);
      // exp(-gate) overflows to infinity here: silu and its gradient must come out 0, not NaN.
      gate.view({-1})[0].fill_(-100.0);
      auto gate_ref = gate.clone().requires_grad_(true), up_ref = up.clone().requires_grad_(true);
      auto out_ref = torch::silu(gate_ref) * up_ref;
      auto grads_ref = torch::autograd::grad({out_ref}, {gate_ref, up_ref}, {g});

      auto out = torch::empty_like(gate);
      model::cuda::swiglu_forward(gate, up, out);
      CHECK(relative_error(out, out_ref) < tolerance);
      auto dgate = torch::empty_like(gate), dup = torch::empty_like(gate);
      model::cuda::swiglu_backward(g, gate, up, dgate, dup);
      CHECK(relative_error(dgate, grads_ref[0]) < tolerance);
      CHECK(relative_error(dup, grads_ref[1]) < tolerance);

      auto in_place = gate.clone();  // the output may be an input
      model::cuda::swiglu_forward(in_place, up, in_place);
      CHECK(torch::equal(in_place, out));
    }
  }
}

TEST_CASE("the fused rotary kernel matches the unfused rotate_half ops and their gradient", "[gpu][kernels]") {
  torch::manual_seed(14);
  struct Case {
    int64_t batch, tokens, q_heads, k_heads, head_dim;
  };
  for (auto dtype : kKernelDtypes) {
    for (const auto& c : {Case{2, 5, 6, 2, 64}, Case{1, 1, 3, 1, 100}, Case{2, 17, 8, 8, 128}}) {
      INFO("dtype " << dtype << ", B " << c.batch << ", T " << c.tokens << ", Hq " << c.q_heads << ", Hk "
                    << c.k_heads << ", D " << c.head_dim);
      const double tolerance = kernel_tolerance(dtype);
      auto q = random_on_gpu({c.batch, c.tokens, c.q_heads, c.head_dim}, dtype);
      auto k = random_on_gpu({c.batch, c.tokens, c.k_heads, c.head_dim}, dtype);
      // Tables with unrelated entries everywhere (not cos and sin of angles repeated over the
      // halves), so that reading a wrong entry shows.
      auto options = torch::TensorOptions().device(kCuda);
      auto cos = torch::rand({c.tokens, c.head_dim}, options) * 2 - 1;
      auto sin = torch::rand({c.tokens, c.head_dim}, options) * 2 - 1;
      auto q_ref = q.clone().requires_grad_(true), k_ref = k.clone().requires_grad_(true);
      auto q_out_ref = unfused_rotary(q_ref, cos, sin), k_out_ref = unfused_rotary(k_ref, cos, sin);
      auto gq = random_on_gpu(q.sizes(), dtype), gk = random_on_gpu(k.sizes(), dtype);
      auto grads_ref = torch::autograd::grad({q_out_ref, k_out_ref}, {q_ref, k_ref}, {gq, gk});

      auto q_out = torch::empty_like(q), k_out = torch::empty_like(k);
      model::cuda::rotary_qk(q, k, cos, sin, /*inverse=*/false, q_out, k_out);
      CHECK(relative_error(q_out, q_out_ref) < tolerance);
      CHECK(relative_error(k_out, k_out_ref) < tolerance);
      auto dq = torch::empty_like(q), dk = torch::empty_like(k);
      model::cuda::rotary_qk(gq, gk, cos, sin, /*inverse=*/true, dq, dk);
      CHECK(relative_error(dq, grads_ref[0]) < tolerance);
      CHECK(relative_error(dk, grads_ref[1]) < tolerance);

      auto q_in_place = q.clone(), k_in_place = k.clone();  // the outputs may be the inputs
      model::cuda::rotary_qk(q_in_place, k_in_place, cos, sin, /*inverse=*/false, q_in_place, k_in_place);
      CHECK(torch::equal(q_in_place, q_out));
      CHECK(torch::equal(k_in_place, k_out));
    }
  }
}

TEST_CASE("the fused rotary kernel's inverse undoes it with real tables", "[gpu][kernels]") {
  torch::manual_seed(15);
  const int64_t tokens = 9, head_dim = 64;
  auto options = torch::TensorOptions().device(kCuda);
  auto angles = torch::rand({tokens, head_dim / 2}, options) * 20;
  auto cos = torch::cat({angles.cos(), angles.cos()}, -1), sin = torch::cat({angles.sin(), angles.sin()}, -1);
  auto q = torch::randn({2, tokens, 4, head_dim}, options), k = torch::randn({2, tokens, 2, head_dim}, options);
  auto q_out = torch::empty_like(q), k_out = torch::empty_like(k);
  model::cuda::rotary_qk(q, k, cos, sin, /*inverse=*/false, q_out, k_out);
  model::cuda::rotary_qk(q_out, k_out, cos, sin, /*inverse=*/true, q_out, k_out);
  CHECK(relative_error(q_out, q) < 1e-6);
  CHECK(relative_error(k_out, k) < 1e-6);
}

TEST_CASE("the fused AdamW step matches optim::AdamW", "[gpu][kernels]") {
  torch::manual_seed(16);
  const optim::AdamWOptions options{/*beta1=*/0.9, /*beta2=*/0.95, /*eps=*/1e-8, /*weight_decay=*/0.1};
  const double lr = 1e-2;
  for (const auto& shape : {std::vector<int64_t>{1000}, std::vector<int64_t>{33, 7}}) {
    INFO("shape " << at::IntArrayRef(shape));
    auto param = random_on_gpu(shape, torch::kFloat32);
    auto reference = param.clone().requires_grad_(true);
    optim::AdamW optimizer({{"p", reference}}, options);
    auto exp_avg = torch::zeros_like(param), exp_avg_sq = torch::zeros_like(param);
    for (int64_t step = 1; step <= 3; ++step) {
      INFO("step " << step);
      auto grad = random_on_gpu(shape, torch::kFloat32);
      reference.mutable_grad() = grad.clone();
      optimizer.step(lr);
      model::cuda::adamw_step(param, grad, exp_avg, exp_avg_sq, lr, options.beta1, options.beta2, options.eps,
                              options.weight_decay, step);
      const auto state = optimizer.state();
      CHECK(relative_error(param, reference.detach()) < 1e-6);
      CHECK(relative_error(exp_avg, state.at("exp_avg.p")) < 1e-6);
      CHECK(relative_error(exp_avg_sq, state.at("exp_avg_sq.p")) < 1e-6);
    }
  }
}

// The comparisons above must be able to fail: one element of a kernel's output off by 1e-5 of
// the output's largest magnitude is ten times the fp32 tolerance.
TEST_CASE("the kernels' fp32 tolerance catches one element off by 1e-5", "[gpu][kernels]") {
  torch::manual_seed(17);
  auto x = random_on_gpu({64, 100}, torch::kFloat32);
  auto w = 1 + random_on_gpu({100}, torch::kFloat32, 0.1);
  auto expected = unfused_rms_norm(x, w, 1e-6);
  auto y = torch::empty_like(x);
  auto rstd = torch::empty({64}, x.options());
  model::cuda::rms_norm_forward(x, w, 1e-6, y, rstd);
  CHECK(relative_error(y, expected) < kernel_tolerance(torch::kFloat32));
  auto perturbed = y.clone();
  perturbed.view({-1})[1234] += 1e-5 * expected.abs().max();
  CHECK(relative_error(perturbed, expected) > kernel_tolerance(torch::kFloat32));
  CHECK(relative_error(perturbed, expected) > 9e-6);
}

// The modules' fused paths on CUDA (model::use_fused_kernels): a decoder layer's norms, MLP and
// rotation through the fused autograd functions give the unfused ops' output and gradients.
TEST_CASE("a decoder layer on CUDA matches itself unfused with the fused kernels on", "[gpu][kernels]") {
  for (auto dtype : {torch::kFloat32, torch::kBFloat16}) {
    INFO("dtype " << dtype);
    torch::manual_seed(7);
    model::ModelConfig config;
    config.hidden_size = 128;
    config.num_heads = 4;
    config.num_kv_heads = 2;
    config.intermediate_size = 352;
    model::DecoderLayer layer(config, model::AttentionFeatures{});
    for (auto& p : layer->parameters()) p.set_data(0.1 * torch::randn(p.sizes()));
    for (const auto& item : layer->named_parameters())
      if (item.key().find("norm") != std::string::npos) item.value().set_data(1 + 0.1 * torch::randn(item.value().sizes()));
    layer->to(kCuda, dtype);
    const auto rotary = model::rotary_tables(64, 32, 10000.0);
    const model::RotaryTables tables{rotary.cos.to(kCuda), rotary.sin.to(kCuda)};
    const auto x = torch::randn({2, 64, 128}, torch::TensorOptions().device(kCuda)).to(dtype);
    auto run = [&](bool fused) {
      model::use_fused_kernels(*layer, fused);
      layer->zero_grad();
      auto y = layer->forward(x, tables);
      y.to(torch::kFloat32).square().sum().backward();
      std::vector<torch::Tensor> out{y.detach()};
      for (const auto& p : layer->parameters()) out.push_back(p.grad().clone());
      return out;
    };
    const auto fused = run(true), unfused = run(false);
    const double tolerance = dtype == torch::kFloat32 ? 1e-5 : 3e-2;
    for (size_t i = 0; i < fused.size(); ++i) {
      INFO("output " << i << " (the layer's output, then its parameters' gradients)");
      CHECK(relative_error(fused[i], unfused[i]) < tolerance);
    }
  }
}

// FP8 GEMMs through at::_scaled_mm (tensorwise: fp32 out; rowwise: bf16 out) against the same
// fp8 operands dequantized and multiplied in fp32, which is what the CPU runs; and a whole FP8
// linear layer, forward and both gradients, on CUDA against the same layer on the CPU
// (rowwise_with_gw_hp's input gradient multiplies rowwise dy by a tensorwise W).
TEST_CASE("FP8 GEMMs through _scaled_mm match the dequantized operands' product", "[gpu][float8]") {
  torch::manual_seed(23);
  const auto e4m3 = c10::ScalarType::Float8_e4m3fn;
  const auto x = torch::randn({256, 512}, torch::TensorOptions().device(kCuda));
  const auto w = 0.1 * torch::randn({384, 512}, torch::TensorOptions().device(kCuda));
  const auto dy = torch::randn({256, 384}, torch::TensorOptions().device(kCuda));
  for (const auto scaling : {model::Float8Scaling::tensorwise, model::Float8Scaling::rowwise,
                             model::Float8Scaling::rowwise_with_gw_hp}) {
    INFO(to_string(scaling));
    CHECK(model::float8_gemm_path(scaling, c10::DeviceType::CUDA).rfind("at::_scaled_mm", 0) == 0);
    const auto blocks = model::scaling_blocks(scaling).forward;
    const bool p2 = model::Float8Recipe{scaling}.power_of_two();
    const auto qx = model::quantize_float8(x, e4m3, blocks.a, p2);
    const auto qw = model::quantize_float8(w, e4m3, blocks.b, p2);
    const model::Float8Operand qwt{qw.data.t(), qw.scale.t()};
    const auto scaled = model::float8_mm(qx, qwt);
    const auto emulated = torch::mm(qx.dequantize(), qwt.dequantize());
    CHECK(relative_error(scaled, emulated) < (p2 ? 1e-2 : 1e-5));
    const model::Float8Recipe recipe{scaling, c10::ScalarType::Float8_e5m2};
    auto run = [&](const torch::Device& device) {
      const auto xi = x.to(device).requires_grad_(true), wi = w.to(device).requires_grad_(true);
      const auto y = model::float8_linear(xi, wi, {}, recipe);
      (y * dy.to(device)).sum().backward();
      return std::vector<torch::Tensor>{y.detach().cpu(), xi.grad().cpu(), wi.grad().cpu()};
    };
    const auto on_gpu = run(kCuda), on_cpu = run(torch::kCPU);
    for (size_t i = 0; i < on_gpu.size(); ++i) {
      INFO("output " << i << " (y, dx, dW)");
      CHECK(relative_error(on_gpu[i], on_cpu[i]) < (p2 ? 1e-2 : 1e-4));
    }
  }
}

int main(int argc, char** argv) {
  if (c10::cuda::device_count() == 0) {
    std::puts("skip: no CUDA device visible; these tests run on a GPU machine (scripts/device/run.sh)");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
