// The CPU loops of fused RMSNorm (model/kernels/fused_rms_norm.h) over contiguous fp32 rows of
// d elements, in a file without LibTorch: it compiles with -O3 -fopenmp and its own flags, where
// a LibTorch include would cost half a minute of compiling. Both run over the rows in parallel
// on LibTorch's OpenMP threads.
#pragma once
#include <cstdint>

namespace xtrain::model {

// Rows per block of the weight's gradient: each block sums its rows into a row of its own, so
// the sum does not depend on the number of threads.
constexpr int64_t kRmsNormRowsPerBlock = 64;

// The blocks of rms_norm_rows_backward's dw_blocks for `rows` rows: at least one.
inline int64_t rms_norm_row_blocks(int64_t rows) {
  const int64_t blocks = (rows + kRmsNormRowsPerBlock - 1) / kRmsNormRowsPerBlock;
  return blocks > 1 ? blocks : 1;
}

// y = w * x * r and rstd = r = 1 / sqrt(mean(x^2) + eps) per row; with an addend a (else null),
// the row normalised is h = x + a, written to h.
void rms_norm_rows(const float* x, const float* a, float* h, const float* w, float* y, float* rstd, int64_t rows,
                   int64_t d, double eps);

// dx = r * (g*w - n * mean(g*w*n)) with n = x*r, plus dx_more when not null; each block of
// kRmsNormRowsPerBlock rows adds g * n to its row of dw_blocks ([rms_norm_row_blocks(rows), d],
// zeroed by the caller).
void rms_norm_rows_backward(const float* g, const float* x, const float* w, const float* rstd, const float* dx_more,
                            float* dx, double* dw_blocks, int64_t rows, int64_t d);

}  // namespace xtrain::model
