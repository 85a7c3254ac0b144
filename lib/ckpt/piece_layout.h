// Where a checkpoint piece lies in its whole tensor, in every dimension: a box
// [offsets, offsets + sizes) of the tensor (a tensor-parallel shard, a range of experts, or the
// whole tensor) and a range [begin, begin + count) of the box's row-major flattening (the slice
// that FSDP keeps of what the rank holds). Column and row shards, expert shards, and FSDP over
// any of them are all pieces, and a piece of one layout can fill a piece of any other: both are
// turned into runs of consecutive elements of the whole tensor's flattening and intersected.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <torch/types.h>

namespace xtrain::ckpt {

struct PieceLayout {
  std::vector<int64_t> shape;    // of the whole tensor
  std::vector<int64_t> offsets;  // of the box, one per dimension
  std::vector<int64_t> sizes;    // of the box
  int64_t begin = 0, count = 0;  // in the box's flattening

  // The whole tensor, or elements [begin, begin + count) of its flattening.
  static PieceLayout whole(std::vector<int64_t> shape);
  static PieceLayout range(std::vector<int64_t> shape, int64_t begin, int64_t count);
  int64_t box_numel() const;
  // A description of what is wrong with it ("" when consistent), for error messages.
  std::string problem() const;
};

// A stretch of consecutive elements: `length` elements from `global` in the whole tensor's
// flattening, held from `local` on in the piece's values.
struct PieceRun {
  int64_t global = 0, local = 0, length = 0;
};

// The piece's elements as runs, ascending in `global`, adjacent ones merged.
std::vector<PieceRun> piece_runs(const PieceLayout& piece);

// Whether the two pieces of one tensor hold any element in common.
bool pieces_overlap(const PieceLayout& a, const PieceLayout& b);

// Copies into `to_values` (1-D, the piece `to`) every element that the piece `from` holds
// (`from_values`, 1-D); returns how many it copied.
int64_t copy_overlap(const PieceLayout& from, const torch::Tensor& from_values, const PieceLayout& to,
                     torch::Tensor& to_values);

}  // namespace xtrain::ckpt
