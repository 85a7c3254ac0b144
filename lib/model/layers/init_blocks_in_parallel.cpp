#include "model/layers/init_blocks_in_parallel.h"

#include <ATen/Parallel.h>

namespace xtrain::model {

void for_each_block_in_parallel(int64_t first_block, int64_t end_block, const std::function<void(int64_t)>& draw) {
  at::parallel_for(first_block, end_block, 1, [&](int64_t from, int64_t to) {
    for (int64_t block = from; block < to; ++block) draw(block);
  });
}

}  // namespace xtrain::model
