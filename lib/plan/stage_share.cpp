#include "plan/stage_share.h"

#include <algorithm>
#include <vector>

namespace xtrain::plan {

StageShare stage_share(const ModelCensus& c, const ClusterLayout& layout) {
  const auto tp = static_cast<double>(layout.tp), ep = static_cast<double>(layout.ep);
  const auto count = static_cast<int64_t>(c.layers.size());
  const int64_t per_stage = (count + layout.pp - 1) / layout.pp;
  std::vector<StageShare> stages;
  for (int64_t stage = 0; stage < layout.pp; ++stage) {
    StageShare s;
    for (int64_t i = stage * per_stage; i < std::min(count, (stage + 1) * per_stage); ++i) {
      const auto& layer = c.layers[static_cast<size_t>(i)];
      const double dense = static_cast<double>(layer.total() - layer.experts) / tp;
      const double experts = static_cast<double>(layer.experts) / (tp * ep);
      s.dense += dense;
      s.experts += experts;
      // Every rank computes its share of a token's active experts: ep moves rows, not work.
      s.token_matrices += static_cast<double>(layer.attention + layer.dense + layer.active_experts) / tp;
      s.expert_matrices += static_cast<double>(layer.active_experts) / tp;
      s.largest_layer = std::max(s.largest_layer, dense + experts);
      ++s.layers;
      s.moe_layers += layer.experts > 0 ? 1 : 0;
    }
    if (stage == 0) s.dense += static_cast<double>(c.embedding) / tp;
    if (stage == layout.pp - 1) {
      s.head = static_cast<double>(c.head > 0 ? c.head : c.embedding) / tp;
      s.dense += static_cast<double>(c.head + c.other) / tp;
      s.token_matrices += s.head;
    }
    stages.push_back(s);
  }
  auto fullest = *std::max_element(stages.begin(), stages.end(), [](const StageShare& a, const StageShare& b) {
    return a.dense + a.experts < b.dense + b.experts;
  });
  for (const auto& s : stages) {
    fullest.all_token_matrices += s.token_matrices;
    fullest.all_layers += s.layers;
  }
  return fullest;
}

}  // namespace xtrain::plan
