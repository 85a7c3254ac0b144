// The counting CPU allocator: every CPU tensor's storage counted in when allocated and out when
// freed, the peak held, raw allocations (which carry no size to their deleter) counted alike,
// and the storage usable and aligned as LibTorch's own.
#include <catch2/catch.hpp>

#include <cstdint>

#include <c10/core/CPUAllocator.h>
#include <torch/torch.h>

#include "device/device.h"
#include "device/host_tensor_memory.h"

using namespace xtrain::util;

TEST_CASE("the counting CPU allocator counts each tensor's bytes in and out and holds the peak", "[util][memory]") {
  track_host_tensor_memory();
  REQUIRE(host_tensor_memory_tracked());
  constexpr int64_t kMiB = 1 << 20;
  const int64_t before = host_tensor_bytes();
  reset_peak_host_tensor_bytes();
  {
    auto a = torch::ones({kMiB / 4}, torch::kFloat32);      // 1 MiB
    auto b = torch::zeros({3 * kMiB / 8}, torch::kFloat64);  // 3 MiB
    CHECK(host_tensor_bytes() - before == 4 * kMiB);
    CHECK(reinterpret_cast<uintptr_t>(a.data_ptr()) % 64 == 0);
    CHECK(reinterpret_cast<uintptr_t>(b.data_ptr()) % 64 == 0);
    CHECK(a.sum().item<double>() == kMiB / 4);
  }
  CHECK(host_tensor_bytes() == before);
  CHECK(peak_host_tensor_bytes() - before >= 4 * kMiB);
  CHECK(peak_device_memory_bytes(c10::Device(c10::kCPU)) == peak_host_tensor_bytes());

  auto* allocator = c10::GetCPUAllocator();
  void* raw = allocator->raw_allocate(2 * kMiB);
  CHECK(host_tensor_bytes() - before == 2 * kMiB);
  allocator->raw_deallocate(raw);
  CHECK(host_tensor_bytes() == before);

  reset_peak_device_memory(c10::Device(c10::kCPU));
  CHECK(peak_host_tensor_bytes() == host_tensor_bytes());
}
