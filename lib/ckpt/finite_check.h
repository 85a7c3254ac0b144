// Finite values in a checkpoint folder. A checkpoint to continue from must hold finite weights
// and optimizer state: NaN or infinity in one tensor makes every later step non-finite, and a
// run that resumed from it would skip steps until it gave up. The files are checked as they lie
// on disk, memory-mapped, before anything is loaded: what the load then reads is exactly these
// values (widened to fp32, which keeps NaN and infinity), so the run never holds them.
#pragma once
#include <string>
#include <vector>

namespace xtrain::ckpt {

// One line per floating-point tensor (F64, F32, F16, BF16) of every *.safetensors file in dir
// that holds NaN or infinite values, e.g. "model.safetensors: tensor 'x' has 1 NaN and 0
// infinite values of 64"; empty when all are finite. A malformed file is an InputError.
std::vector<std::string> non_finite_tensors(const std::string& dir);

}  // namespace xtrain::ckpt
