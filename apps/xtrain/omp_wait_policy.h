// How idle OpenMP threads wait (train.omp_wait_policy), applied before any parallel work.
//
// LibTorch runs elementwise and oneDNN (bf16) work on libgomp's pool and fp32 GEMMs on
// OpenBLAS's own pthread pool. Both pools spin after each parallel region, so when the threads
// fill the cores, spinning OpenMP workers take the cores from the BLAS threads: measured on 2
// cores, passive OpenMP waiting trains the fp32 demo recipe 2.0x faster (6.2k against 3.1k
// tokens/s) and recipes/bench-cpu.yaml 1.3x, while bf16, which runs on the OpenMP pool alone,
// is 15% slower with it. libgomp reads OMP_WAIT_POLICY once, when it is loaded, so the policy
// is set by re-executing xtrain (the same process id, arguments and descriptors) with it in the
// environment. A policy already in the environment is the user's choice and is kept.
#pragma once
#include "config/recipe.h"

namespace xtrain {

// Returns when nothing needs to change (or the re-exec failed); otherwise does not return.
void apply_omp_wait_policy(const config::Recipe& recipe, char** argv);

}  // namespace xtrain
