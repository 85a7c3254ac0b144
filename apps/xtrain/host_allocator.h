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
#pragma once

namespace xtrain {

void keep_freed_host_memory();

}  // namespace xtrain
