#include "optim/adamw_parallel.h"

#include <ATen/Parallel.h>

#include "util/cpu_kernel_support.h"

namespace xtrain::optim {

void adamw_elements_in_parallel(float* p, const float* g, float* m, float* v, int64_t n, const AdamWScalars& s) {
  at::parallel_for(0, n, cpu::kGrainElements, [&](int64_t begin, int64_t end) {
    adamw_elements(p + begin, g + begin, m + begin, v + begin, end - begin, s);
  });
}

}  // namespace xtrain::optim
