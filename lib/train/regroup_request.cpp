#include "train/regroup_request.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>

#include "launch/rank_environment.h"

namespace xtrain::train {

bool regroup_requested() {
  const char* path = std::getenv(launch::kRegroupFileVariable);
  struct stat info {};
  return path != nullptr && *path != '\0' && ::stat(path, &info) == 0;
}

void take_regroup_request() {
  if (const char* path = std::getenv(launch::kRegroupFileVariable)) std::remove(path);
}

}  // namespace xtrain::train
