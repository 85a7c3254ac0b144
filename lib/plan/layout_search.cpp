#include "plan/layout_search.h"

#include <algorithm>

namespace xtrain::plan {
namespace {

std::vector<int64_t> powers_of_two_upto(int64_t limit) {
  std::vector<int64_t> values;
  for (int64_t v = 1; v <= limit; v *= 2) values.push_back(v);
  return values;
}

}  // namespace

std::vector<LayoutCandidate> search_layouts(const ModelCensus& c, const config::Recipe& base, int64_t nodes,
                                            int64_t gpus_per_node, const HardwareProfile& hw, size_t keep,
                                            int64_t* tried) {
  const int64_t world = nodes * gpus_per_node, layers = static_cast<int64_t>(c.layers.size());
  const int64_t seq = base.data.seq_len, batch = base.train.global_batch_size;
  std::vector<LayoutCandidate> fitting;
  int64_t count = 0;
  for (int64_t tp : powers_of_two_upto(std::min<int64_t>(gpus_per_node, 8))) {
    if (c.heads % tp != 0) continue;
    for (int64_t pp : powers_of_two_upto(std::min<int64_t>(layers, 32))) {
      if (layers % pp != 0) continue;
      for (int64_t cp : powers_of_two_upto(seq >= 16384 ? 16 : 1)) {
        const int64_t data = world / (tp * pp * cp);
        if (data < 1 || data * tp * pp * cp != world || seq % (2 * cp) != 0) continue;
        for (int64_t ep : powers_of_two_upto(c.experts > 0 ? std::min<int64_t>(c.experts, 64) : 1)) {
          if ((c.experts > 0 && c.experts % (ep * tp) != 0) || (data * cp) % ep != 0) continue;
          for (bool hybrid : {false, true}) {
            // HSDP: a node's data ranks shard, the nodes replicate.
            const int64_t fsdp = hybrid ? std::max<int64_t>(1, gpus_per_node / (tp * cp)) : data;
            if (hybrid && (fsdp >= data || data % fsdp != 0)) continue;
            for (auto recompute : {memory::Recompute::none, memory::Recompute::selective, memory::Recompute::full}) {
              for (int64_t micro : {1, 2, 4}) {
                if (batch % (data * micro) != 0) continue;
                if (pp > 1 && batch / (data * micro) < pp) continue;  // too few micro batches to fill the stages
                auto recipe = base;
                auto& p = recipe.parallel;
                p.tp = tp, p.pp = pp, p.cp = cp, p.ep = ep, p.fsdp = fsdp, p.dp = data / fsdp;
                p.sequence_parallel = tp > 1;
                p.pp_schedule = pp > 1 ? config::PpSchedule::interleaved_1f1b : config::PpSchedule::one_f_one_b;
                p.pp_virtual_stages = pp > 1 && layers % (pp * 2) == 0 ? 2 : 1;
                if (c.experts > 0) p.intra_layer_micro_batch = 2;
                recipe.memory.recompute = recompute;
                recipe.memory.recompute_ratio = 1.0;
                recipe.memory.chunked_loss = "auto";
                recipe.train.micro_batch_size = micro;
                ++count;
                LayoutCandidate candidate{recipe, layout_of(recipe, nodes, gpus_per_node), {}, {}};
                candidate.memory = estimate_memory(c, recipe, candidate.layout, hw);
                if (candidate.memory.total() > hw.memory_gib * kGiB) continue;
                candidate.time = estimate_step_time(c, recipe, candidate.layout, hw);
                fitting.push_back(std::move(candidate));
              }
            }
          }
        }
      }
    }
  }
  std::sort(fitting.begin(), fitting.end(), [](const LayoutCandidate& a, const LayoutCandidate& b) {
    return a.time.seconds() < b.time.seconds();
  });
  if (fitting.size() > keep) fitting.resize(keep);
  if (tried) *tried = count;
  return fitting;
}

}  // namespace xtrain::plan
