#include "device/host_tensor_memory.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include "device/host_block_pool.h"

namespace xtrain::util {
namespace {

std::atomic<int64_t> live_bytes{0}, peak_bytes{0};
std::atomic<bool> tracked{false};
HostBlockPool* large_blocks = nullptr;  // set once, before the allocator is installed; never freed

// Tensors from 64 KiB go to the pool: a step's activations, gradients, logits and gathered units
// are all far larger, while the many tensors of a few elements stay in malloc's small bins.
constexpr size_t kPooledFrom = 64 << 10;

// Each allocation carries its size in a header of one alignment unit before the storage, so that
// the raw deleter, which gets only the pointer, can count it out; the storage keeps LibTorch's
// 64-byte alignment.
constexpr size_t kHeader = 64;

void count(int64_t bytes) {
  const int64_t now = live_bytes.fetch_add(bytes) + bytes;
  int64_t peak = peak_bytes.load();
  while (now > peak && !peak_bytes.compare_exchange_weak(peak, now)) {
  }
}

void free_counted(void* data) {
  if (!data) return;
  if (large_blocks && large_blocks->owns(data)) {
    count(-static_cast<int64_t>(large_blocks->release(data)));
    return;
  }
  auto* block = static_cast<char*>(data) - kHeader;
  int64_t bytes = 0;
  std::memcpy(&bytes, block, sizeof(bytes));
  count(-bytes);
  c10::free_cpu(block);
}

class CountingCpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    if (large_blocks && n >= kPooledFrom) {
      // Where no more address space can be reserved the block comes from malloc, which says so in
      // LibTorch's own words when memory itself has run out.
      try {
        void* data = large_blocks->allocate(n);
        count(static_cast<int64_t>(n));
        return {data, data, &free_counted, c10::Device(c10::DeviceType::CPU)};
      } catch (const std::bad_alloc&) {
      }
    }
    auto* block = static_cast<char*>(c10::alloc_cpu(n + kHeader));
    const auto bytes = static_cast<int64_t>(n);
    std::memcpy(block, &bytes, sizeof(bytes));
    count(bytes);
    void* data = block + kHeader;
    return {data, data, &free_counted, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_counted; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

}  // namespace

void track_host_tensor_memory(LargeHostBlocks large) {
  static CountingCpuAllocator allocator;
  if (tracked.exchange(true)) return;
  if (large == LargeHostBlocks::pooled) large_blocks = new HostBlockPool();
  c10::SetCPUAllocator(&allocator, /*priority=*/1);
}

bool host_tensor_memory_tracked() { return tracked.load(); }
int64_t host_tensor_bytes() { return live_bytes.load(); }
int64_t peak_host_tensor_bytes() { return peak_bytes.load(); }
void reset_peak_host_tensor_bytes() { peak_bytes.store(live_bytes.load()); }
int64_t host_pool_footprint_bytes() {
  return large_blocks ? static_cast<int64_t>(large_blocks->footprint_bytes()) : 0;
}

}  // namespace xtrain::util
