// How idle OpenMP threads wait (train.omp_wait_policy), applied before any parallel work.
//
// auto is libgomp's default (spin briefly, then sleep), as in PyTorch eager. Passive waiting
// pays a futex wake-up at every parallel region: with the torch wheel (MKL on libgomp's pool)
// recipes/bench-cpu.yaml in fp32 on 2 cores trained at a median 2.8k tokens/s passive against
// 3.4k default and 3.6k active (4 alternating rounds; eager 3.0k). Active spinning takes the
// cores from the data loader and from other ranks, so it is a choice, not the default.
// libgomp reads OMP_WAIT_POLICY once, when it is loaded, so the policy
// is set by re-executing xtrain (the same process id, arguments and descriptors) with it in the
// environment. A policy already in the environment is the user's choice and is kept.
#pragma once
#include "config/recipe.h"

namespace xtrain {

// Returns when nothing needs to change (or the re-exec failed); otherwise does not return.
void apply_omp_wait_policy(const config::Recipe& recipe, char** argv);

}  // namespace xtrain
