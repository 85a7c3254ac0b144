#include "plan/stage_share.h"

#include <algorithm>
#include <vector>

#include "config/pipeline_layout.h"

namespace xtrain::plan {

// Pipeline rank `rank`'s share: its chunks, in its order (config/pipeline_layout.h's placement,
// the embedding, the head and each prediction depth counting as a layer, the depths on the last
// chunk, as xtrain cuts the model, or as the recipe's parallel.pp_layers cuts it; or, where the
// layout says so, the layers split evenly with the ends on the first and last stage beside them).
StageShare pipeline_rank_share(const ModelCensus& c, const ClusterLayout& layout, int64_t rank) {
  const auto tp = static_cast<double>(layout.tp), ep = static_cast<double>(layout.ep);
  const auto count = static_cast<int64_t>(c.layers.size());
  const int64_t v = std::max<int64_t>(1, layout.virtual_stages), chunks = layout.pp * v;
  const int64_t decoder_layers = count - c.prediction_depths;
  std::vector<config::PipelineChunk> all;
  if (!layout.pipeline_layers.empty()) {
    all = config::pipeline_chunks(decoder_layers, chunks, c.prediction_depths, layout.pipeline_layers);
  } else if (layout.ends_as_layers && decoder_layers + 2 >= chunks) {
    all = config::pipeline_chunks(decoder_layers, chunks, c.prediction_depths);
  } else {
    const int64_t per_chunk = (count + chunks - 1) / chunks;
    for (int64_t k = 0; k < chunks; ++k)
      all.push_back({std::min(count, k * per_chunk), std::min(count, (k + 1) * per_chunk), k == 0, k == chunks - 1});
  }
  StageShare s;
  const auto placement = config::pipeline_placement(layout.schedule, layout.pp, v);
  for (int64_t local = 0; local < v; ++local) {
    const auto& chunk = all[static_cast<size_t>(placement.global_chunk(rank, local))];
    s.chunk_layers.emplace_back(chunk.first_layer, chunk.last_layer);
    for (int64_t i = chunk.first_layer; i < chunk.last_layer; ++i) {
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
    if (chunk.embedding) s.dense += static_cast<double>(c.embedding) / tp;
    if (chunk.head) {
      s.head = static_cast<double>(c.head > 0 ? c.head : c.embedding) / tp;
      s.dense += static_cast<double>(c.head + c.other) / tp;
      s.token_matrices += s.head;
    }
  }
  s.pipeline_rank = rank;
  return s;
}

StageShare stage_share(const ModelCensus& c, const ClusterLayout& layout) {
  std::vector<StageShare> stages;
  for (int64_t rank = 0; rank < layout.pp; ++rank) stages.push_back(pipeline_rank_share(c, layout, rank));
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
