// Tests of the CUDA paths. They need a CUDA device: without one the executable prints why and
// exits 77, which ctest reports as skipped (tests/CMakeLists.txt registers each case by name).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#include <torch/torch.h>

#include "parallel/process_groups.h"
#include "parallel/shard_unit.h"
#include "memory/activation_offload.h"
#include "model/blockwise_attention.h"
#include "model/sdpa_attention.h"

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

int main(int argc, char** argv) {
  if (c10::cuda::device_count() == 0) {
    std::puts("skip: no CUDA device visible; these tests run on a GPU machine (scripts/device/run.sh)");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
