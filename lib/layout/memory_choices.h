// The closed choices of the memory policy (memory/memory_policy.h): what recomputes in
// backward, which attention kernel runs, and whether fused kernels replace unfused ops. The
// names are the recipe's (memory.recompute, memory.attention, memory.fused_kernels). No
// LibTorch: the recipe (config/recipe.h) holds them too.
#pragma once
#include "util/choice.h"

namespace xtrain::memory {

enum class Recompute { none, full, selective };
// automatic is the recipe's "auto", resolved before the policy is applied (train/run_setup.h).
enum class Attention { automatic, naive, blockwise, sdpa };
// memory.fused_kernels: auto (a fused kernel wherever one exists), on (the same, and a recipe
// whose dtype or device has none is refused), off (the unfused ops everywhere).
enum class FusedKernels { automatic, on, off };

XTRAIN_CHOICES_BEGIN
constexpr const char* to_string(Recompute value) {
  switch (value) {
    case Recompute::none: return "none";
    case Recompute::full: return "full";
    case Recompute::selective: return "selective";
  }
  return nullptr;
}

constexpr const char* to_string(Attention value) {
  switch (value) {
    case Attention::automatic: return "auto";
    case Attention::naive: return "naive";
    case Attention::blockwise: return "blockwise";
    case Attention::sdpa: return "sdpa";
  }
  return nullptr;
}

constexpr const char* to_string(FusedKernels value) {
  switch (value) {
    case FusedKernels::automatic: return "auto";
    case FusedKernels::on: return "on";
    case FusedKernels::off: return "off";
  }
  return nullptr;
}
XTRAIN_CHOICES_END

}  // namespace xtrain::memory
