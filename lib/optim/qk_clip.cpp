#include "optim/qk_clip.h"

#include <cmath>
#include <limits>

#include <torch/torch.h>

namespace xtrain::optim {

std::pair<torch::Tensor, torch::Tensor> qk_clip_gammas(const torch::Tensor& logit_max, double tau, int64_t kv_heads) {
  const auto s = logit_max.to(torch::kCPU, torch::kFloat64);
  TORCH_CHECK(s.dim() == 1 && kv_heads > 0 && s.size(0) % kv_heads == 0, "QK-clip: ", s.size(0),
              " query heads do not group over ", kv_heads, " key heads");
  // Only heads above tau change; tau / S for S <= tau would be >= 1 (or a division by -inf).
  const auto query = torch::where(s > tau, tau / s, torch::ones_like(s));
  const auto key = std::get<0>(query.view({kv_heads, -1}).min(1));
  return {query, key};
}

void scale_heads(QkClipPiece& piece, const torch::Tensor& factor) {
  const int64_t count = piece.tensor.numel();
  if (count == 0) return;
  const int64_t heads = factor.size(0);
  TORCH_CHECK(piece.whole_numel % heads == 0 && piece.begin + count <= piece.whole_numel, "QK-clip: a piece of ",
              count, " elements at ", piece.begin, " of ", piece.whole_numel, " does not split into ", heads, " heads");
  const auto per_element = factor.to(piece.tensor.device(), piece.tensor.scalar_type())
                               .repeat_interleave(piece.whole_numel / heads)
                               .narrow(0, piece.begin, count);
  piece.tensor.mul_(per_element.view(piece.tensor.sizes()));
}

QkClip::QkClip(std::vector<QkClipLayer> layers, double tau, MaxOverRanks max_over_ranks, torch::Device device)
    : layers_(std::move(layers)), tau_(tau), max_over_ranks_(std::move(max_over_ranks)), device_(device) {}

QkClipStats QkClip::apply() {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> records;
  for (auto& layer : layers_) records.push_back(layer.take_logit_max().to(device_, torch::kFloat32).reshape(-1));
  QkClipStats stats;
  if (records.empty()) return stats;
  auto all = torch::cat(records);  // one reduction for every layer
  if (max_over_ranks_) max_over_ranks_(all);
  all = all.to(torch::kCPU, torch::kFloat64);
  stats.max_logit = all.max().item<double>();
  int64_t offset = 0;
  for (auto& layer : layers_) {
    const auto s = all.narrow(0, offset, layer.heads);
    offset += layer.heads;
    const auto [query, key] = qk_clip_gammas(s, tau_, layer.kv_heads);
    const int64_t clipped = (s > tau_).sum().item<int64_t>();
    if (clipped == 0) continue;
    stats.heads_clipped += clipped;
    for (auto& piece : layer.query) scale_heads(piece, query.sqrt());
    for (auto& piece : layer.key) scale_heads(piece, key.sqrt());
  }
  return stats;
}

}  // namespace xtrain::optim
