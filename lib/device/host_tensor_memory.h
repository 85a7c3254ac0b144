// The memory this process's CPU tensors hold, counted as they are allocated and freed: the CPU
// counterpart of a CUDA caching allocator's allocated-bytes statistics. Resident memory (RSS)
// also holds what malloc keeps of freed blocks and the runtime itself; this counts only live
// tensor storage, which is what a memory model of activations and state predicts.
//
// track_host_tensor_memory() installs a counting allocator in front of LibTorch's CPU allocator
// (c10::SetCPUAllocator); storage allocated before it is freed as it was allocated and not
// counted. Storage of 64 KiB and more comes from a HostBlockPool (device/host_block_pool.h), apart
// from malloc's heap, unless `large` says malloc. Thread-safe; the counts are of the whole
// process.
#pragma once
#include <cstdint>

namespace xtrain::util {

enum class LargeHostBlocks { pooled, malloc };

void track_host_tensor_memory(LargeHostBlocks large = LargeHostBlocks::pooled);
bool host_tensor_memory_tracked();
int64_t host_tensor_bytes();       // now
int64_t peak_host_tensor_bytes();  // the most at once since tracking began or the last reset
void reset_peak_host_tensor_bytes();  // the peak <- now
int64_t host_pool_footprint_bytes();  // the pool's pages ever handed out (0 without the pool)

}  // namespace xtrain::util
