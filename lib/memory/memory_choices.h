// The closed choices of the memory policy (memory/memory_policy.h): what recomputes in
// backward, and which attention kernel runs. The names are the recipe's (memory.recompute,
// memory.attention).
#pragma once
#include "util/choice.h"

namespace xtrain::memory {

enum class Recompute { none, full, selective };
// automatic is the recipe's "auto", resolved before the policy is applied (train/run_setup.h).
enum class Attention { automatic, naive, blockwise, sdpa };

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
XTRAIN_CHOICES_END

}  // namespace xtrain::memory
