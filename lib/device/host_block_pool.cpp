#include "device/host_block_pool.h"

#include <sys/mman.h>
#include <sys/resource.h>

#include <algorithm>
#include <new>

namespace xtrain::util {
namespace {

size_t round_up(size_t bytes, size_t to) { return (bytes + to - 1) / to * to; }

}  // namespace

void* HostBlockPool::allocate(size_t bytes) {
  const size_t size = round_up(std::max<size_t>(bytes, 1), kGranule);
  std::lock_guard<std::mutex> lock(mutex_);
  // Address-ordered first fit: as good as best fit at keeping holes few, and better on the
  // training steps measured (a recomputed step: 4 MiB beyond the live peak against 10).
  auto fit = std::find_if(free_by_address_.begin(), free_by_address_.end(),
                          [size](const auto& block) { return block.second >= size; });
  if (fit == free_by_address_.end()) fit = free_by_address_.find(add_segment(size));
  const auto [at, found] = *fit;
  erase_free(fit);
  if (found > size) insert_free(at + size, found - size);
  used_.emplace(at, std::make_pair(size, bytes));
  live_ += size;
  const size_t segment = segment_of(at);
  const size_t end = at + size - segment_begin_[segment].load(std::memory_order_relaxed);
  if (end > touched_[segment]) {
    footprint_ += end - touched_[segment];
    touched_[segment] = end;
  }
  return reinterpret_cast<void*>(at);
}

bool HostBlockPool::owns(const void* p) const {
  const auto at = reinterpret_cast<uintptr_t>(p);
  const size_t count = segments_.load(std::memory_order_acquire);
  for (size_t i = 0; i < count; ++i)
    if (at >= segment_begin_[i].load(std::memory_order_relaxed) && at < segment_end_[i].load(std::memory_order_relaxed))
      return true;
  return false;
}

size_t HostBlockPool::release(void* p) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto used = used_.find(reinterpret_cast<uintptr_t>(p));
  if (used == used_.end()) return 0;
  uintptr_t at = used->first;
  size_t size = used->second.first;
  const size_t asked = used->second.second;
  used_.erase(used);
  live_ -= size;
  // Merge with the free neighbours inside the same segment.
  auto next = free_by_address_.find(at + size);
  if (next != free_by_address_.end() && !segment_starts_at(next->first)) {
    size += next->second;
    erase_free(next);
  }
  auto after = free_by_address_.lower_bound(at);
  if (after != free_by_address_.begin() && !segment_starts_at(at)) {
    auto before = std::prev(after);
    if (before->first + before->second == at) {
      at = before->first;
      size += before->second;
      erase_free(before);
    }
  }
  insert_free(at, size);
  return asked;
}

size_t HostBlockPool::live_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return live_;
}

size_t HostBlockPool::footprint_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return footprint_;
}

size_t HostBlockPool::free_blocks() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return free_by_address_.size();
}

uintptr_t HostBlockPool::add_segment(size_t at_least) {
  const size_t count = segments_.load(std::memory_order_relaxed);
  if (count == kMaxSegments) throw std::bad_alloc();
  // Reserved, not committed: pages cost memory only once a block on them is used. Under an
  // address-space limit (ulimit -v) a reservation counts in full, so it takes a sixteenth of the
  // limit at most.
  size_t reserve = next_segment_;
  struct rlimit limit {};
  if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
    reserve = std::min(reserve, static_cast<size_t>(limit.rlim_cur) / 16);
  size_t bytes = round_up(std::max(at_least, reserve), size_t{2} << 20);
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED && bytes > at_least) {  // a strict overcommit policy: ask for the block alone
    bytes = at_least;
    base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  }
  if (base == MAP_FAILED) throw std::bad_alloc();
  const auto begin = reinterpret_cast<uintptr_t>(base);
  segment_begin_[count].store(begin, std::memory_order_relaxed);
  segment_end_[count].store(begin + bytes, std::memory_order_relaxed);
  segments_.store(count + 1, std::memory_order_release);
  next_segment_ = std::min(next_segment_ * 2, size_t{1} << 40);
  insert_free(begin, bytes);
  return begin;
}

size_t HostBlockPool::segment_of(uintptr_t at) const {
  const size_t count = segments_.load(std::memory_order_relaxed);
  for (size_t i = 0; i < count; ++i)
    if (at >= segment_begin_[i].load(std::memory_order_relaxed) && at < segment_end_[i].load(std::memory_order_relaxed))
      return i;
  return count;  // not reached for a pool address
}

bool HostBlockPool::segment_starts_at(uintptr_t at) const {
  const size_t count = segments_.load(std::memory_order_relaxed);
  for (size_t i = 0; i < count; ++i)
    if (segment_begin_[i].load(std::memory_order_relaxed) == at) return true;
  return false;
}

void HostBlockPool::insert_free(uintptr_t at, size_t bytes) { free_by_address_.emplace(at, bytes); }

void HostBlockPool::erase_free(std::map<uintptr_t, size_t>::iterator it) { free_by_address_.erase(it); }

}  // namespace xtrain::util
