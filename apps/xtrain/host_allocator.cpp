#include "host_allocator.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>

namespace xtrain {

namespace {

bool malloc_tuned_by_user() {
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") || std::getenv("MALLOC_TRIM_THRESHOLD_")) return true;
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  return tunables && std::strstr(tunables, "glibc.malloc.");
}

}  // namespace

void keep_freed_host_memory() {
  if (malloc_tuned_by_user()) return;
  constexpr int kLargestMmapThreshold = 32 << 20;
  constexpr int kTrimThreshold = 1 << 30;
  mallopt(M_MMAP_THRESHOLD, kLargestMmapThreshold);
  mallopt(M_TRIM_THRESHOLD, kTrimThreshold);
}

}  // namespace xtrain
