// How the C library's allocator, which holds LibTorch's CPU tensors, treats freed memory.
//
// By default glibc hands large freed blocks back to the kernel (munmap, or trimming the top of
// the heap), so every training step maps its activations afresh and takes a page fault, and
// a page of zeroing, for every 4 KiB of them: 4.5k faults a step on recipes/bench-cpu.yaml,
// against 0.2k for PyTorch eager, whose Python heap rarely shrinks. Keeping blocks of up to
// 32 MiB (glibc's largest fixed mmap threshold) in the heap and trimming it only beyond 1 GiB
// of free space brings that under 0.4k (7 when set by MALLOC_*_ before the process starts):
// like LibTorch's CUDA caching allocator, the process keeps what its steps use. Users who tune malloc themselves (MALLOC_*_ environment
// variables or GLIBC_TUNABLES) keep their settings.
//
// Tensors of 64 KiB and more do not use that heap at all but a pool of their own
// (device/host_block_pool.h), whose resident size follows the live tensors' peak; the environment
// variable XTRAIN_HOST_ALLOCATOR=malloc puts them back in the heap (to compare, or to hand
// them to a preloaded malloc).
#pragma once

#include "device/host_tensor_memory.h"

namespace xtrain {

void keep_freed_host_memory();

// XTRAIN_HOST_ALLOCATOR: pool (the default) or malloc; another value ends the process with an
// error naming the variable and exit code 2.
util::LargeHostBlocks large_host_blocks_from_environment();

}  // namespace xtrain
