// The host block pool: address-ordered first fit, neighbours merged on release, memory kept, and a footprint that
// follows the live blocks' high-water mark when a step's sizes repeat.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "device/host_block_pool.h"

using xtrain::util::HostBlockPool;

namespace {
constexpr size_t kKiB = 1024, kMiB = 1024 * 1024;
uintptr_t address(const void* p) { return reinterpret_cast<uintptr_t>(p); }
}  // namespace

TEST_CASE("the host block pool hands out whole pages, takes the lowest free block that fits and merges on release",
          "[util][memory]") {
  HostBlockPool pool;
  void* a = pool.allocate(100 * kKiB);  // 25 pages
  void* b = pool.allocate(1 * kMiB);
  void* c = pool.allocate(300 * kKiB);
  void* d = pool.allocate(1 * kMiB);
  CHECK(address(a) % HostBlockPool::kGranule == 0);
  CHECK(address(b) == address(a) + 100 * kKiB);
  CHECK(address(c) == address(b) + kMiB);
  CHECK(pool.owns(c));
  CHECK_FALSE(pool.owns(&pool));
  CHECK(pool.live_bytes() == 100 * kKiB + 2 * kMiB + 300 * kKiB);
  std::memset(d, 1, kMiB);  // usable

  CHECK(pool.release(b) == kMiB);
  CHECK(pool.release(a) == 100 * kKiB);  // merges with b's block: one hole of 1124 KiB
  CHECK(pool.release(c) == 300 * kKiB);  // and c's: 1424 KiB before d, and the rest after it
  CHECK(pool.free_blocks() == 2);
  // First fit: the hole before d, not the segment's untouched rest.
  void* e = pool.allocate(1400 * kKiB);
  CHECK(address(e) == address(a));
  CHECK(pool.footprint_bytes() == 100 * kKiB + 2 * kMiB + 300 * kKiB);
  // Memory released is reused, not returned: the footprint stays.
  pool.release(e);
  pool.release(d);
  CHECK(pool.free_blocks() == 1);
  CHECK(pool.live_bytes() == 0);
  CHECK(pool.footprint_bytes() == 100 * kKiB + 2 * kMiB + 300 * kKiB);
}

TEST_CASE("the host block pool's footprint stays at the live peak when steps repeat their sizes", "[util][memory]") {
  HostBlockPool pool;
  std::mt19937 random(7);
  std::vector<size_t> sizes;
  for (int i = 0; i < 200; ++i) sizes.push_back((64 * kKiB) << (random() % 8));  // 64 KiB to 8 MiB
  size_t live_peak = 0;
  for (int step = 0; step < 5; ++step) {
    // A forward that keeps every block, and a backward that frees them in reverse with a
    // gradient of half the size allocated and freed beside each.
    std::vector<void*> kept;
    for (size_t s : sizes) kept.push_back(pool.allocate(s));
    live_peak = std::max(live_peak, pool.live_bytes());
    for (size_t i = sizes.size(); i-- > 0;) {
      void* grad = pool.allocate(sizes[i] / 2);
      live_peak = std::max(live_peak, pool.live_bytes());
      pool.release(kept[i]);
      pool.release(grad);
    }
  }
  CHECK(pool.live_bytes() == 0);
  CHECK(pool.footprint_bytes() <= live_peak + 8 * kMiB);
  CHECK(pool.footprint_bytes() >= live_peak);
}

TEST_CASE("the host block pool takes a request larger than a segment in a segment of its own", "[util][memory]") {
  HostBlockPool pool;
  void* small = pool.allocate(kMiB);
  void* large = pool.allocate(size_t{1536} * kMiB);  // beyond the first segment's 1 GiB
  CHECK(pool.owns(large));
  CHECK(pool.owns(static_cast<char*>(large) + size_t{1536} * kMiB - 1));
  static_cast<char*>(large)[0] = 1;
  pool.release(large);
  pool.release(small);
  CHECK(pool.live_bytes() == 0);
}

TEST_CASE("the host block pool takes the lowest hole that fits, not the tightest", "[util][memory]") {
  HostBlockPool pool;
  void* wide = pool.allocate(2 * kMiB);
  void* keep1 = pool.allocate(kMiB);
  void* narrow = pool.allocate(kMiB);
  void* keep2 = pool.allocate(kMiB);
  pool.release(wide);
  pool.release(narrow);
  void* block = pool.allocate(kMiB);
  CHECK(address(block) == address(wide));
  void* next = pool.allocate(kMiB);  // the rest of that hole
  CHECK(address(next) == address(wide) + kMiB);
  for (void* p : {block, next, keep1, keep2}) pool.release(p);
  CHECK(pool.free_blocks() == 1);
}
