#include "omp_wait_policy.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

namespace xtrain {

void apply_omp_wait_policy(const config::Recipe& recipe, char** argv) {
  if (std::getenv("OMP_WAIT_POLICY")) return;
  std::string policy = recipe.train.omp_wait_policy;
  if (policy == "auto" || policy == "default") return;  // libgomp's default: spin briefly, then sleep
  setenv("OMP_WAIT_POLICY", policy.c_str(), /*overwrite=*/1);
  execv("/proc/self/exe", argv);
  unsetenv("OMP_WAIT_POLICY");  // exec failed (no /proc): run on with the default
}

}  // namespace xtrain
