// How idle OpenMP threads wait (train.omp_wait_policy), applied before any parallel work.
//
// With Debian's LibTorch 1.13, fp32 GEMMs ran on OpenBLAS's own pthread pool and everything else
// on libgomp's; both spin after each parallel region, so when the threads filled the cores the
// spinning OpenMP workers took the cores from the BLAS threads, and passive OpenMP waiting
// trained the fp32 demo recipe 2.0x faster, while bf16 (oneDNN on the OpenMP pool alone) was
// 15% slower with it. The torch wheel's MKL runs on libgomp's pool too: on 2 cores
// recipes/bench-cpu.yaml in fp32 trains at 4.6k-5.2k tokens/s either way (3 alternating rounds),
// so auto keeps passive waiting for fp32 and the default for bf16. libgomp reads OMP_WAIT_POLICY once, when it is loaded, so the policy
// is set by re-executing xtrain (the same process id, arguments and descriptors) with it in the
// environment. A policy already in the environment is the user's choice and is kept.
#pragma once
#include "config/recipe.h"

namespace xtrain {

// Returns when nothing needs to change (or the re-exec failed); otherwise does not return.
void apply_omp_wait_policy(const config::Recipe& recipe, char** argv);

}  // namespace xtrain
