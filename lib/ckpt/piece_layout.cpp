#include "ckpt/piece_layout.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

namespace xtrain::ckpt {

PieceLayout PieceLayout::whole(std::vector<int64_t> shape) {
  int64_t numel = 1;
  for (auto d : shape) numel *= d;
  return range(std::move(shape), 0, numel);
}

PieceLayout PieceLayout::range(std::vector<int64_t> shape, int64_t begin, int64_t count) {
  PieceLayout piece;
  piece.offsets.assign(shape.size(), 0);
  piece.sizes = shape;
  piece.shape = std::move(shape);
  piece.begin = begin;
  piece.count = count;
  return piece;
}

int64_t PieceLayout::box_numel() const {
  int64_t numel = 1;
  for (auto d : sizes) numel *= d;
  return numel;
}

std::string PieceLayout::problem() const {
  if (offsets.size() != shape.size() || sizes.size() != shape.size())
    return fmt::format("a box of {} offsets and {} sizes in a tensor of {} dimensions", offsets.size(), sizes.size(),
                       shape.size());
  for (size_t d = 0; d < shape.size(); ++d)
    if (offsets[d] < 0 || sizes[d] < 0 || offsets[d] + sizes[d] > shape[d])
      return fmt::format("the box [{}] + [{}] leaves the shape [{}]", fmt::join(offsets, ", "), fmt::join(sizes, ", "),
                         fmt::join(shape, ", "));
  if (begin < 0 || count < 0 || begin + count > box_numel())
    return fmt::format("the range [{}, {}) leaves the box of {} elements", begin, begin + count, box_numel());
  return "";
}

std::vector<PieceRun> piece_runs(const PieceLayout& piece) {
  std::vector<PieceRun> runs;
  if (piece.count == 0) return runs;
  const size_t dims = piece.shape.size();
  if (dims == 0) return {{0, 0, piece.count}};
  std::vector<int64_t> strides(dims, 1);
  for (size_t d = dims - 1; d > 0; --d) strides[d - 1] = strides[d] * piece.shape[d];
  const int64_t row = piece.sizes.back();
  const int64_t end = piece.begin + piece.count;
  // The box's rows (runs along the last dimension) that the range touches, by their index over
  // the other dimensions, advanced like an odometer.
  int64_t first_row = piece.begin / row;
  std::vector<int64_t> index(dims - 1, 0);
  for (size_t d = dims - 1, rest = static_cast<size_t>(first_row); d > 0; --d) {
    index[d - 1] = static_cast<int64_t>(rest) % piece.sizes[d - 1];
    rest /= static_cast<size_t>(piece.sizes[d - 1]);
  }
  for (int64_t k = first_row; k * row < end; ++k) {
    int64_t row_global = piece.offsets.back();
    for (size_t d = 0; d + 1 < dims; ++d) row_global += (piece.offsets[d] + index[d]) * strides[d];
    const int64_t from = std::max(piece.begin, k * row), to = std::min(end, (k + 1) * row);
    const PieceRun run{row_global + from - k * row, from - piece.begin, to - from};
    if (!runs.empty() && runs.back().global + runs.back().length == run.global &&
        runs.back().local + runs.back().length == run.local)
      runs.back().length += run.length;
    else
      runs.push_back(run);
    for (size_t d = dims - 1; d > 0; --d) {  // the next row's index
      if (++index[d - 1] < piece.sizes[d - 1]) break;
      index[d - 1] = 0;
    }
  }
  return runs;
}

bool pieces_overlap(const PieceLayout& a, const PieceLayout& b) {
  const auto runs_a = piece_runs(a), runs_b = piece_runs(b);
  for (size_t i = 0, j = 0; i < runs_a.size() && j < runs_b.size();) {
    const auto& x = runs_a[i];
    const auto& y = runs_b[j];
    if (std::max(x.global, y.global) < std::min(x.global + x.length, y.global + y.length)) return true;
    if (x.global + x.length <= y.global + y.length)
      ++i;
    else
      ++j;
  }
  return false;
}

int64_t copy_overlap(const PieceLayout& from, const torch::Tensor& from_values, const PieceLayout& to,
                     torch::Tensor& to_values) {
  const auto source = piece_runs(from), target = piece_runs(to);
  int64_t copied = 0;
  for (size_t i = 0, j = 0; i < source.size() && j < target.size();) {
    const auto& s = source[i];
    const auto& t = target[j];
    const int64_t lo = std::max(s.global, t.global), hi = std::min(s.global + s.length, t.global + t.length);
    if (lo < hi) {
      to_values.narrow(0, t.local + lo - t.global, hi - lo)
          .copy_(from_values.narrow(0, s.local + lo - s.global, hi - lo));
      copied += hi - lo;
    }
    if (s.global + s.length <= t.global + t.length)
      ++i;
    else
      ++j;
  }
  return copied;
}

}  // namespace xtrain::ckpt
