// The memory this process's CPU tensors hold, counted as they are allocated and freed: the CPU
// counterpart of a CUDA caching allocator's allocated-bytes statistics. Resident memory (RSS)
// also holds what malloc keeps of freed blocks and the runtime itself; this counts only live
// tensor storage, which is what a memory model of activations and state predicts.
//
// track_host_tensor_memory() installs a counting allocator in front of LibTorch's CPU allocator
// (c10::SetCPUAllocator); storage allocated before it is freed as it was allocated and not
// counted. Thread-safe; the counts are of the whole process.
#pragma once
#include <cstdint>

namespace xtrain::util {

void track_host_tensor_memory();
bool host_tensor_memory_tracked();
int64_t host_tensor_bytes();       // now
int64_t peak_host_tensor_bytes();  // the most at once since tracking began or the last reset
void reset_peak_host_tensor_bytes();  // the peak <- now

}  // namespace xtrain::util
