// A pool of large host blocks, apart from the C library's heap: the CPU counterpart of a CUDA
// caching allocator's large pool. CPU tensors of a training step come and go in the same sizes
// every step; in glibc's heap the runtime's small allocations settle into the holes they leave,
// so large requests extend the heap and its resident size grows 50-70 MiB beyond the live
// tensors (docs/plan.md). Here large blocks share no memory with anything else: the free block
// of lowest address that fits is split (address-ordered first fit), freed blocks merge with free
// neighbours, and the memory is kept for the next step, never returned. Resident memory is then
// the live blocks' high-water mark plus the holes first fit leaves (1-5% of it on the training
// steps measured, the most where a MoE's routed rows change size every step).
//
// Address space is reserved in segments (the first of 1 GiB, each next twice the last, at most a
// sixteenth of an address-space limit, or the request if larger), untouched until used, and is
// never unmapped. Thread-safe.
#pragma once
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

namespace xtrain::util {

class HostBlockPool {
 public:
  static constexpr size_t kGranule = 4096;  // blocks are whole pages

  HostBlockPool() = default;
  HostBlockPool(const HostBlockPool&) = delete;
  HostBlockPool& operator=(const HostBlockPool&) = delete;

  // A page-aligned block of at least `bytes`; throws std::bad_alloc when no memory is left.
  void* allocate(size_t bytes);
  // Whether `p` lies in the pool's address space (lock-free; for a deleter that must route).
  bool owns(const void* p) const;
  // Returns a block from allocate() to the pool, and the bytes allocate() was asked for.
  size_t release(void* p);

  size_t live_bytes() const;       // handed out now, whole pages
  size_t footprint_bytes() const;  // every page ever handed out: what the pool holds resident
  size_t free_blocks() const;      // for tests: how many free pieces the segments are in

 private:
  static constexpr size_t kMaxSegments = 48;
  // With mutex_ held:
  uintptr_t add_segment(size_t at_least);  // its start, one free block
  size_t segment_of(uintptr_t at) const;
  bool segment_starts_at(uintptr_t at) const;
  void insert_free(uintptr_t at, size_t bytes);
  void erase_free(std::map<uintptr_t, size_t>::iterator it);

  std::array<std::atomic<uintptr_t>, kMaxSegments> segment_begin_{}, segment_end_{};
  std::atomic<size_t> segments_{0};
  mutable std::mutex mutex_;
  std::map<uintptr_t, size_t> free_by_address_;           // start -> size
  std::map<uintptr_t, std::pair<size_t, size_t>> used_;   // start -> (size, the bytes asked for)
  std::array<size_t, kMaxSegments> touched_{};             // each segment's highest block end so far, as an offset
  size_t live_ = 0, footprint_ = 0, next_segment_ = size_t{1} << 30;
};

}  // namespace xtrain::util
