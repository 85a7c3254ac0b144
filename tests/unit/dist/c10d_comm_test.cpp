// The Comm over a real c10d Gloo backend, on one rank over an in-memory store: the flat
// collectives (all_gather and reduce_scatter over the tensor-level c10d calls) return what
// their contract says.
#include <chrono>

#include <catch2/catch.hpp>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/torch.h>

#include "dist/process_groups.h"

using namespace xtrain;

TEST_CASE("collectives over a one-rank Gloo backend", "[dist]") {
  auto options = c10d::ProcessGroupGloo::Options::create(std::chrono::seconds(30));
  options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  auto backend = c10::make_intrusive<c10d::ProcessGroupGloo>(c10::make_intrusive<c10d::HashStore>(), 0, 1, options);
  auto comm = dist::make_backend_comm(backend, "world", {0}, std::chrono::seconds(30));
  CHECK(comm->size() == 1);
  CHECK(comm->name() == "world");
  auto t = torch::arange(6, torch::kFloat32);
  auto gathered = torch::empty({6});
  comm->all_gather(gathered, t * 3).wait();
  CHECK(torch::equal(gathered, t * 3));
  auto reduced = torch::empty({6});
  comm->reduce_scatter_sum(reduced, t + 2).wait();
  CHECK(torch::equal(reduced, t + 2));
  auto sum = torch::tensor({1.25}, torch::kFloat64);
  comm->all_reduce_sum(sum).wait();
  CHECK(sum.item<double>() == 1.25);
  CHECK_THROWS_WITH(comm->all_gather(torch::empty({5}), t), Catch::Contains("size * in.numel()"));
}
