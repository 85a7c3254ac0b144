// The fused AdamW update's CPU loop over a parameter's elements in parallel
// (optim/fused_adamw.h), in a file without LibTorch: at::parallel_for runs on LibTorch's OpenMP
// threads only in a file compiled with -fopenmp, which cannot use the precompiled LibTorch
// header, and a LibTorch include would cost half a minute of compiling.
#pragma once
#include <cstdint>

#include "optim/adamw_elements.h"

namespace xtrain::optim {

// adamw_elements over the n elements of p, g, m and v, in runs of cpu::kGrainElements at least.
void adamw_elements_in_parallel(float* p, const float* g, float* m, float* v, int64_t n, const AdamWScalars& s);

}  // namespace xtrain::optim
