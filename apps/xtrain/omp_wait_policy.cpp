#include "omp_wait_policy.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

namespace xtrain {

void apply_omp_wait_policy(const config::Recipe& recipe, char** argv) {
  if (std::getenv("OMP_WAIT_POLICY")) return;
  const auto policy = recipe.train.omp_wait_policy;
  switch (policy) {
    case config::OmpWaitPolicy::automatic:
    case config::OmpWaitPolicy::library_default: return;  // libgomp's default: spin briefly, then sleep
    case config::OmpWaitPolicy::passive:
    case config::OmpWaitPolicy::active: break;
  }
  setenv("OMP_WAIT_POLICY", to_string(policy), /*overwrite=*/1);
  execv("/proc/self/exe", argv);
  unsetenv("OMP_WAIT_POLICY");  // exec failed (no /proc): run on with the default
}

}  // namespace xtrain
