// The parallel loop of parameter_init.h's draws over blocks, in a file without LibTorch:
// at::parallel_for runs on LibTorch's OpenMP threads only in a file compiled with -fopenmp, which
// cannot use the precompiled LibTorch header, and a LibTorch include would cost half a minute of
// compiling.
#pragma once
#include <cstdint>
#include <functional>

namespace xtrain::model {

// draw(block) for every block of [first_block, end_block), one block to a task at least, on
// LibTorch's threads; an exception `draw` throws is rethrown here.
void for_each_block_in_parallel(int64_t first_block, int64_t end_block, const std::function<void(int64_t)>& draw);

}  // namespace xtrain::model
