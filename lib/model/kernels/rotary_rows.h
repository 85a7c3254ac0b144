// The CPU loops of fused rotary embedding (model/kernels/fused_rotary.h) over the fp32 rows of q
// and k, in a file without LibTorch: it compiles with -O3 -fopenmp -ffp-contract=off (each
// product rounded as the unfused ops round it), where a LibTorch include would cost half a minute
// of compiling. Both run over the rows of q and then k in one parallel loop on LibTorch's OpenMP
// threads.
#pragma once
#include <cstdint>

namespace xtrain::model {

// The rows of a [B, H, T, D] tensor, wherever its strides put them (its last dimension contiguous).
struct HeadRows {
  float* data;
  int64_t heads, seq, batch_stride, head_stride, seq_stride;

  int64_t count(int64_t batch) const { return batch * heads * seq; }
  int64_t position(int64_t row) const { return row % seq; }
  float* row(int64_t row) const {
    const int64_t t = row % seq, h = row / seq % heads, b = row / seq / heads;
    return data + b * batch_stride + h * head_stride + t * seq_stride;
  }
};

// out = x * c + rotate_half(x) * s for each row x of in[0] (q) and in[1] (k), into out[0] and
// out[1], with c and s the rows of the contiguous [T, d] tables cos and sin at the row's position;
// rotate_half(x) = [-x2, x1] for the halves x1, x2.
void rotary_rows(const HeadRows (&in)[2], const HeadRows (&out)[2], int64_t batch, const float* cos, const float* sin,
                 int64_t d);

// The transpose, for backward: dx = g * c + rotate_half^T(g * s), rotate_half^T(y) = [y2, -y1].
void rotary_rows_backward(const HeadRows (&in)[2], const HeadRows (&out)[2], int64_t batch, const float* cos,
                          const float* sin, int64_t d);

}  // namespace xtrain::model
