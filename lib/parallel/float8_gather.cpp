#include "parallel/float8_gather.h"

#include <algorithm>

#include <torch/torch.h>

#include "model/layers/float8_linear.h"

namespace xtrain::parallel {
namespace {

constexpr auto kFormat = c10::ScalarType::Float8_e4m3fn;  // weights are e4m3 in every recipe

struct Matrices {
  int64_t count, rows, cols;
};
Matrices matrices_of(const std::vector<int64_t>& shape) {
  return shape.size() == 2 ? Matrices{1, shape[0], shape[1]} : Matrices{shape[0], shape[1], shape[2]};
}
using model::block_count;
using model::block_edge;

}  // namespace

Float8Gather::Float8Gather(std::vector<Weight> weights, int64_t padded, std::shared_ptr<Comm> group)
    : weights_(std::move(weights)), group_(std::move(group)) {
  std::sort(weights_.begin(), weights_.end(), [](const Weight& a, const Weight& b) { return a.offset < b.offset; });
  for (const auto& w : weights_) {
    TORCH_CHECK(w.shape.size() == 2 || w.shape.size() == 3, "FP8 gather: a weight of ", w.shape.size(), " dimensions");
    amax_offsets_.push_back(amax_count_);
    amax_count_ += blocks_of(w);
  }
  const int64_t ranks = group_->size();
  shard_numel_ = padded / ranks;
  for (int64_t rank = 0; rank < ranks; ++rank) {
    const int64_t begin = rank * shard_numel_, end = begin + shard_numel_;
    std::vector<Run> runs;
    int64_t at = begin, fp8 = 0;
    for (size_t i = 0; i < weights_.size(); ++i) {
      const auto& w = weights_[i];
      const int64_t first = std::max(begin, w.offset), last = std::min(end, w.offset + w.numel);
      if (first >= last) continue;
      if (first > at) runs.push_back({at, first - at});
      runs.push_back({first, last - first, static_cast<int64_t>(i), first - w.offset});
      fp8 += last - first;
      at = last;
    }
    if (end > at) runs.push_back({at, end - at});
    fp8_per_rank_ = std::max(fp8_per_rank_, fp8);
    rest_per_rank_ = std::max(rest_per_rank_, shard_numel_ - fp8);
    runs_.push_back(std::move(runs));
  }
  // A collective of no elements is not one every backend takes.
  fp8_per_rank_ = std::max<int64_t>(fp8_per_rank_, 1);
  rest_per_rank_ = std::max<int64_t>(rest_per_rank_, 1);
}

int64_t Float8Gather::blocks_of(const Weight& weight) const {
  const auto m = matrices_of(weight.shape);
  return m.count * block_count(weight.block.rows, m.rows) * block_count(weight.block.cols, m.cols);
}

// The block (within the weight) of each of its elements [first, first + length).
torch::Tensor Float8Gather::block_ids(const Weight& weight, int64_t first, int64_t length) const {
  const auto m = matrices_of(weight.shape);
  const int64_t r = block_edge(weight.block.rows, m.rows), c = block_edge(weight.block.cols, m.cols);
  const int64_t per_row = block_count(weight.block.cols, m.cols), per_matrix = block_count(weight.block.rows, m.rows) * per_row;
  const auto element = torch::arange(first, first + length, torch::TensorOptions().dtype(torch::kInt64));
  const auto matrix = element.div(m.rows * m.cols, "floor");
  const auto within = element.remainder(m.rows * m.cols);
  const auto ids = matrix * per_matrix + within.div(m.cols, "floor").div(r, "floor") * per_row +
                   within.remainder(m.cols).div(c, "floor");
  return ids.to(weight.param.device());
}

PendingCollective Float8Gather::start(const torch::Tensor& shard) {
  torch::NoGradGuard no_grad;
  const int64_t rank = group_->rank(), ranks = group_->size();
  const auto floats = shard.options();
  auto local_slice = [&](const Run& run) { return shard.narrow(0, run.flat - rank * shard_numel_, run.length); };
  auto amax = torch::zeros({amax_count_}, floats);
  for (const auto& run : runs_[static_cast<size_t>(rank)]) {
    if (run.weight < 0) continue;
    const auto& w = weights_[static_cast<size_t>(run.weight)];
    amax.scatter_reduce_(0, block_ids(w, run.first, run.length) + amax_offsets_[static_cast<size_t>(run.weight)],
                         local_slice(run).abs(), "amax");
  }
  amax_out_ = torch::empty({ranks * amax_count_}, floats);
  group_->all_gather(amax_out_, amax).wait();
  scales_ = model::float8_scale(amax_out_.view({ranks, amax_count_}).amax(0), kFormat, false);

  const double max = model::float8_max(kFormat);
  auto fp8 = torch::zeros({fp8_per_rank_}, floats.dtype(torch::kUInt8));
  auto rest = torch::zeros({rest_per_rank_}, floats);
  int64_t fp8_at = 0, rest_at = 0;
  for (const auto& run : runs_[static_cast<size_t>(rank)]) {
    const auto values = local_slice(run);
    if (run.weight < 0) {
      rest.narrow(0, rest_at, run.length).copy_(values);
      rest_at += run.length;
      continue;
    }
    const auto& w = weights_[static_cast<size_t>(run.weight)];
    const auto scales = scales_.index_select(0, block_ids(w, run.first, run.length) +
                                                    amax_offsets_[static_cast<size_t>(run.weight)]);
    // model::quantize_float8's arithmetic, element for element.
    fp8.narrow(0, fp8_at, run.length).copy_((values * scales).clamp(-max, max).to(kFormat).view(torch::kUInt8));
    fp8_at += run.length;
  }
  fp8_out_ = torch::empty({ranks * fp8_per_rank_}, fp8.options());
  rest_out_ = torch::empty({ranks * rest_per_rank_}, floats);
  auto fp8_gather = group_->all_gather(fp8_out_, fp8);
  auto rest_gather = group_->all_gather(rest_out_, rest);
  return PendingCollective(
      [fp8_gather, rest_gather]() mutable {
        fp8_gather.wait();
        rest_gather.wait();
      },
      nullptr);
}

void Float8Gather::finish(torch::Tensor& full) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> bytes;
  for (const auto& w : weights_) bytes.push_back(torch::empty({w.numel}, fp8_out_.options()));
  for (size_t rank = 0; rank < runs_.size(); ++rank) {
    int64_t fp8_at = static_cast<int64_t>(rank) * fp8_per_rank_, rest_at = static_cast<int64_t>(rank) * rest_per_rank_;
    for (const auto& run : runs_[rank]) {
      if (run.weight < 0) {
        full.narrow(0, run.flat, run.length).copy_(rest_out_.narrow(0, rest_at, run.length));
        rest_at += run.length;
      } else {
        bytes[static_cast<size_t>(run.weight)].narrow(0, run.first, run.length).copy_(fp8_out_.narrow(0, fp8_at, run.length));
        fp8_at += run.length;
      }
    }
  }
  for (size_t i = 0; i < weights_.size(); ++i) {
    const auto& w = weights_[i];
    const auto m = matrices_of(w.shape);
    const auto scales = scales_.narrow(0, amax_offsets_[i], blocks_of(w))
                            .view({m.count, block_count(w.block.rows, m.rows), block_count(w.block.cols, m.cols)});
    const auto data = bytes[i].view(kFormat).view({m.count, m.rows, m.cols});
    const auto spread = model::spread_block_scales(scales, m.rows, m.cols, w.block);
    full.narrow(0, w.offset, w.numel).copy_((data.to(torch::kFloat32) / spread).reshape(-1));
    model::register_gathered_float8_scales(w.param, w.shape.size() == 2 ? scales[0] : scales);
  }
  fp8_out_ = rest_out_ = amax_out_ = torch::Tensor();
}

void Float8Gather::release() {
  for (const auto& w : weights_) model::unregister_gathered_float8_scales(w.param);
}

int64_t Float8Gather::received_bytes() const {
  return (group_->size() - 1) * (fp8_per_rank_ + 4 * (rest_per_rank_ + amax_count_));
}

}  // namespace xtrain::parallel
