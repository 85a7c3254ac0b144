#include "model/attention/kv_cache.h"

#include <algorithm>

#include <torch/torch.h>

namespace xtrain::model {

KvCache::KvCache(int64_t layers, int64_t capacity)
    : capacity_(std::max<int64_t>(capacity, 1)), keys_(static_cast<size_t>(layers)), values_(static_cast<size_t>(layers)) {}

void KvCache::begin(const torch::Tensor& real, int64_t max_positions) {
  TORCH_CHECK(real.dim() == 2 && real.scalar_type() == torch::kBool, "KvCache::begin takes bool [B, T], got ",
              real.sizes(), " ", real.scalar_type());
  TORCH_CHECK(!real_.defined() || real.size(0) == real_.size(0), "KvCache::begin: ", real.size(0),
              " rows, but the cache holds ", real_.size(0));
  past_ += fresh_;
  fresh_ = real.size(1);
  const auto long_real = real.to(torch::kInt64);
  if (!counts_.defined()) counts_ = torch::zeros({real.size(0)}, long_real.options());
  // A real token's position is its row's count of real tokens before it.
  positions_ = (counts_.unsqueeze(1) + long_real.cumsum(1) - long_real) * long_real;
  counts_ = counts_ + long_real.sum(1);
  const int64_t furthest = counts_.numel() > 0 ? counts_.max().item<int64_t>() : 0;
  TORCH_CHECK(furthest <= max_positions, "a row of ", furthest, " tokens exceeds model.max_seq_len ", max_positions);
  real_ = real_.defined() ? torch::cat({real_, real}, 1) : real.clone();
  // Query i sits at slot past_ + i. It sees the real keys up to its slot, and itself.
  const auto options = torch::TensorOptions().dtype(torch::kInt64).device(real.device());
  const auto query_slot = torch::arange(past_, past_ + fresh_, options).unsqueeze(1);  // [T, 1]
  const auto key_slot = torch::arange(length(), options).unsqueeze(0);                 // [1, S]
  const auto later = (key_slot > query_slot).unsqueeze(0);                              // [1, T, S]
  const auto padding = real_.logical_not().unsqueeze(1).logical_and((key_slot != query_slot).unsqueeze(0));
  hidden_ = later.logical_or(padding).unsqueeze(1);  // [B, 1, T, S]
}

torch::Tensor KvCache::hidden(int64_t window) const {
  if (window <= 0) return hidden_;
  const auto options = torch::TensorOptions().dtype(torch::kInt64).device(hidden_.device());
  const auto query_slot = torch::arange(past_, past_ + fresh_, options).unsqueeze(1);
  const auto key_slot = torch::arange(length(), options).unsqueeze(0);
  // Slots of one row's real tokens are consecutive, so slot distance is position distance.
  return hidden_.logical_or((key_slot <= query_slot - window).view({1, 1, fresh_, length()}));
}

void KvCache::reserve(int64_t layer, const torch::Tensor& k, const torch::Tensor& v) {
  auto& keys = keys_[static_cast<size_t>(layer)];
  auto& values = values_[static_cast<size_t>(layer)];
  if (keys.defined() && keys.size(2) >= length()) return;
  const int64_t room = std::max(capacity_, 2 * length());
  auto grown = [&](const torch::Tensor& old, const torch::Tensor& like) {
    auto fresh = torch::empty({like.size(0), like.size(1), room, like.size(3)}, like.options());
    if (old.defined() && past_ > 0) fresh.narrow(2, 0, past_).copy_(old.narrow(2, 0, past_));
    return fresh;
  };
  keys = grown(keys, k);
  values = grown(values, v);
}

std::pair<torch::Tensor, torch::Tensor> KvCache::append(int64_t layer, const torch::Tensor& k, const torch::Tensor& v) {
  TORCH_CHECK(layer >= 0 && layer < layers(), "KvCache::append: layer ", layer, " of a cache of ", layers());
  TORCH_CHECK(k.size(2) == fresh_ && v.size(2) == fresh_ && k.size(0) == rows(), "KvCache::append: layer ", layer,
              " gives keys ", k.sizes(), " for a forward of ", rows(), " rows of ", fresh_, " tokens");
  reserve(layer, k, v);
  auto& keys = keys_[static_cast<size_t>(layer)];
  auto& values = values_[static_cast<size_t>(layer)];
  keys.narrow(2, past_, fresh_).copy_(k);
  values.narrow(2, past_, fresh_).copy_(v);
  return {keys.narrow(2, 0, length()), values.narrow(2, 0, length())};
}

void KvCache::keep_rows(const torch::Tensor& rows) {
  for (auto* stored : {&keys_, &values_})
    for (auto& t : *stored)
      if (t.defined()) t = t.index_select(0, rows.to(t.device()));
  real_ = real_.index_select(0, rows.to(real_.device()));
  counts_ = counts_.index_select(0, rows.to(counts_.device()));
}

}  // namespace xtrain::model
