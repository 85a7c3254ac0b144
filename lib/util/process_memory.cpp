#include "util/process_memory.h"

#include <sys/resource.h>

namespace xtrain::util {

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;  // ru_maxrss is in KiB on Linux
}

}  // namespace xtrain::util
