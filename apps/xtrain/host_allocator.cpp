#include "host_allocator.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "util/exit_codes.h"

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

util::LargeHostBlocks large_host_blocks_from_environment() {
  const char* value = std::getenv("XTRAIN_HOST_ALLOCATOR");
  if (!value || std::string(value) == "pool") return util::LargeHostBlocks::pooled;
  if (std::string(value) == "malloc") return util::LargeHostBlocks::malloc;
  fmt::print(stderr, "error: XTRAIN_HOST_ALLOCATOR={}: expected pool (the default) or malloc\n", value);
  std::exit(kExitBadInput);
}

}  // namespace xtrain
