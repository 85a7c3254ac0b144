#include "train/context_split.h"

#include <torch/torch.h>

#include "model/deepseek/multi_token_prediction.h"
#include "model/layers/sequence_layout.h"
#include "parallel/context_parallel.h"
#include "train/training_loss.h"

namespace xtrain::train {

data::MicroBatch context_part(const data::MicroBatch& whole, const ContextSplit& split) {
  if (split.ranks == 1) return whole;
  std::vector<int64_t> bounds;
  if (whole.cu_seqlens.defined()) {
    const auto host = whole.cu_seqlens.to(torch::kCPU).contiguous();
    bounds.assign(host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + host.numel());
  }
  const auto shard = parallel::plan_context_shard(whole.inputs.size(1), bounds, split.ranks, split.rank, split.balance);
  const auto mine = shard->row_index(split.rank);
  data::MicroBatch part;
  part.inputs = whole.inputs.index_select(1, mine);
  part.targets = whole.targets.index_select(1, mine);
  part.cu_seqlens = whole.cu_seqlens;
  part.pixel_values = whole.pixel_values;
  part.sample_ids = whole.sample_ids;
  part.target_count = part.targets.ne(data::kIgnoreIndex).sum().item<int64_t>();
  part.context_costs = parallel::context_rank_costs(*shard, bounds);
  part.context = shard;
  part.whole_target_count = whole.target_count;
  for (int64_t k = 1; k <= split.depths_ahead; ++k) {
    part.inputs_ahead.push_back(model::ids_ahead(whole.inputs, k).index_select(1, mine));
    const auto targets = labels_ahead(whole.targets, k, whole.cu_seqlens);
    part.whole_ahead_counts.push_back(targets.ne(data::kIgnoreIndex).sum().item<int64_t>());
    part.targets_ahead.push_back(targets.index_select(1, mine));
  }
  return part;
}

}  // namespace xtrain::train
