// KvCache: the keys and values of the tokens a decoder has already seen, per layer and batch
// row, so that each decoding forward computes its new tokens only. The caller (a sampler) says
// before each forward which of its tokens are real (rows of different lengths are left-padded,
// and a finished row may be fed filler); the cache gives each real token the rotary position of
// its row's count of earlier real tokens, and hides padding keys from every query, so each row
// computes what it would alone. A padding query sees only its own key (its output is unused;
// it keeps the softmax finite).
//
// The model reads it through Batch::kv_cache: its attention layers rotate their new q and k to
// positions(), append k and v (append), and attend over every cached key under hidden(). The
// model needs no other change; the sampler drives it (train/rollout_sampler.h).
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include <torch/types.h>

namespace xtrain::model {

class KvCache {
 public:
  // layers: the model's attention layers; capacity: tokens per row to reserve room for (the
  // storage grows past it when needed).
  KvCache(int64_t layers, int64_t capacity);

  // Before each forward: real, bool [B, T], whether each of its tokens is real. B must equal
  // the rows kept so far. Throws when a real token's position would reach max_positions.
  void begin(const torch::Tensor& real, int64_t max_positions);
  // The rotary position of each of this forward's tokens, int64 [B, T] (0 for padding).
  const torch::Tensor& positions() const { return positions_; }
  // Layer `layer`'s keys and values, k [B, KV, T, D] and v [B, KV, T, Dv] of this forward's
  // tokens, stored after the earlier ones; returns every one so far, [B, KV, S, D] and
  // [B, KV, S, Dv] (S = length()).
  std::pair<torch::Tensor, torch::Tensor> append(int64_t layer, const torch::Tensor& k, const torch::Tensor& v);
  // bool [B, 1, T, S]: true where a query of this forward must not see a key (later, padding,
  // or with window > 0 `window` or more tokens before it).
  torch::Tensor hidden(int64_t window) const;
  // Keeps the rows `rows` (int64 indices into the current rows) only, in that order: a finished
  // row then costs nothing more.
  void keep_rows(const torch::Tensor& rows);

  int64_t layers() const { return static_cast<int64_t>(keys_.size()); }
  int64_t rows() const { return real_.defined() ? real_.size(0) : 0; }
  int64_t length() const { return past_ + fresh_; }  // tokens per row, this forward's included

 private:
  void reserve(int64_t layer, const torch::Tensor& k, const torch::Tensor& v);

  int64_t capacity_;
  std::vector<torch::Tensor> keys_, values_;  // [B, KV, capacity, D], filled up to length()
  torch::Tensor real_;                        // bool [B, length()]
  torch::Tensor counts_;                      // int64 [B]: real tokens so far
  torch::Tensor positions_, hidden_;
  int64_t past_ = 0, fresh_ = 0;  // tokens before this forward, and its own
};

// What an attention layer reads of a forward's cache: none (cache null), or layer `layer` of it.
struct KvCacheSlot {
  KvCache* cache = nullptr;
  int64_t layer = 0;
};

}  // namespace xtrain::model
