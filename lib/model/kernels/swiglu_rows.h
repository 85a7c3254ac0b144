// The CPU loops of fused SwiGLU (model/kernels/fused_swiglu.h) over fp32 rows, in a file without
// LibTorch: it compiles with -O3 -fopenmp and its own flags, where a LibTorch include would cost
// half a minute of compiling. Both run over the rows in parallel on LibTorch's OpenMP threads,
// whole rows to a task.
#pragma once
#include <cstdint>

namespace xtrain::model {

// `count` rows of `width` floats, `stride` floats apart: a contiguous tensor, or a slice of the
// last dimension of one (a mixture of experts' gate and up halves of one matmul's output), which
// the kernel reads where it lies instead of copying.
struct SwigluRows {
  const float* data;
  int64_t count, width, stride;
};

// out = silu(gate) * up, with out contiguous ([gate.count, gate.width]); up has gate's count and width.
void swiglu_rows(const SwigluRows& gate, const SwigluRows& up, float* out);

// With s = sigmoid(gate): dup = dy * gate * s, dgate = dy * up * s * (1 + gate * (1 - s)); dy, dgate
// and dup contiguous.
void swiglu_rows_backward(const float* dy, const SwigluRows& gate, const SwigluRows& up, float* dgate, float* dup);

}  // namespace xtrain::model
