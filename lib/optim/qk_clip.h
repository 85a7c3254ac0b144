// QK-clip (Kimi K2's MuonClip, Kimi Team 2025): after an optimizer step, each attention head h
// whose largest pre-softmax logit over the step's batch, S_h = max q.k * scale, exceeded tau has
// its query projection scaled by sqrt(gamma_h), gamma_h = tau / S_h, and its key projection by
// sqrt(gamma) too, so that the head's logits shrink by gamma_h. Under grouped-query attention a
// key head serves several query heads: it takes the smallest gamma of its group (its other
// heads' logits shrink by sqrt(gamma_h * gamma_min) <= gamma_h, never less than asked). A bias of
// either projection scales with its weight, so that q.k scales exactly. Latent attention's
// shared parts are not handled here (the recipe rules refuse it).
//
// Sharded parameters: a piece holds the elements [begin, begin + numel) of its whole tensor's
// flattening ([heads * head_dim, in] weights and [heads * head_dim] biases, rows by head); the
// largest logits are reduced over every rank first (`max_over_ranks`), so all ranks compute the
// same gamma and scale their own elements.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <torch/types.h>

namespace xtrain::optim {

// One projection tensor's piece on this rank.
struct QkClipPiece {
  torch::Tensor tensor;  // the piece (any shape); scaled in place
  int64_t begin = 0;     // in the whole tensor's flattening
  int64_t whole_numel = 0;
};

// One attention layer.
struct QkClipLayer {
  std::string name;
  int64_t heads = 0, kv_heads = 0;
  // [heads] fp32: the largest logit of each query head since the last call (-inf: none), and
  // the record started over.
  std::function<torch::Tensor()> take_logit_max;
  std::vector<QkClipPiece> query, key;  // weight and, where present, bias
};

// Replaces t ([n] fp32) by the element-wise max over the ranks; the same order on every rank.
using MaxOverRanks = std::function<void(torch::Tensor&)>;

struct QkClipStats {
  int64_t heads_clipped = 0;
  double max_logit = 0;  // the largest S_h of the step over every layer, before clipping
};

// The per-head factors: gamma_h = min(1, tau / S_h) for the query heads, and for each key head
// the min over its query heads (kv head j serves heads j*H/KV .. (j+1)*H/KV - 1). Returns
// {query [heads], key [kv_heads]} in float64.
std::pair<torch::Tensor, torch::Tensor> qk_clip_gammas(const torch::Tensor& logit_max, double tau, int64_t kv_heads);

// Scales piece's elements of head h by factor[h] (factor: [heads], any float dtype).
void scale_heads(QkClipPiece& piece, const torch::Tensor& factor);

class QkClip {
 public:
  QkClip(std::vector<QkClipLayer> layers, double tau, MaxOverRanks max_over_ranks, torch::Device device);
  // Takes every layer's record, reduces it over the ranks and clips the heads above tau.
  QkClipStats apply();

 private:
  std::vector<QkClipLayer> layers_;
  double tau_;
  MaxOverRanks max_over_ranks_;
  torch::Device device_;
};

}  // namespace xtrain::optim
