#include "plan/cluster_layout.h"

#include <algorithm>

#include <fmt/format.h>

#include "util/input_error.h"

namespace xtrain::plan {

std::string ClusterLayout::describe() const {
  std::string text = fmt::format("{} node{} x {} = {} ranks:", nodes, nodes == 1 ? "" : "s", gpus_per_node, world());
  auto add = [&](const char* name, int64_t degree) {
    if (degree > 1) text += fmt::format(" {} {}", name, degree);
  };
  add("pp", pp);
  add("dp", dp);
  add("fsdp", fsdp);
  add("cp", cp);
  add("tp", tp);
  add("ep", ep);
  if (pp > 1) text += fmt::format(" ({}{})", to_string(schedule), virtual_stages > 1 ? fmt::format(", {} virtual stages", virtual_stages) : "");
  if (sequence_parallel) text += " with SP";
  return text;
}

ClusterLayout layout_of(const config::Recipe& recipe, int64_t nodes, int64_t gpus_per_node) {
  if (nodes < 1 || gpus_per_node < 1)
    throw InputError(fmt::format("--nodes {} --gpus-per-node {}: both must be at least 1", nodes, gpus_per_node));
  const auto& p = recipe.parallel;
  ClusterLayout layout;
  layout.nodes = nodes;
  layout.gpus_per_node = gpus_per_node;
  layout.dp = p.dp;
  layout.cp = p.cp;
  layout.tp = p.tp;
  layout.pp = p.pp;
  layout.ep = p.ep;
  layout.virtual_stages = p.pp_virtual_stages;
  layout.pipeline_layers = p.pp_layers;
  layout.sequence_parallel = p.sequence_parallel;
  layout.schedule = p.pp_schedule;
  const int64_t fixed = p.dp * p.cp * p.tp * p.pp;
  if (layout.world() % fixed != 0)
    throw InputError(fmt::format("parallel.dp {} x cp {} x tp {} x pp {} = {} does not divide the {} ranks of {} x {}",
                                 p.dp, p.cp, p.tp, p.pp, fixed, layout.world(), nodes, gpus_per_node));
  layout.fsdp = p.fsdp > 0 ? p.fsdp : layout.world() / fixed;
  if (fixed * layout.fsdp != layout.world())
    throw InputError(fmt::format("parallel.fsdp {} x dp {} x cp {} x tp {} x pp {} is {} ranks, not the {} of {} x {}",
                                 layout.fsdp, p.dp, p.cp, p.tp, p.pp, fixed * layout.fsdp, layout.world(), nodes,
                                 gpus_per_node));
  const auto& t = recipe.train;
  const int64_t per_step = t.micro_batch_size * layout.data_ranks();
  if (t.global_batch_size % per_step != 0)
    throw InputError(fmt::format("train.global_batch_size {} is not a multiple of train.micro_batch_size {} x {} data "
                                 "ranks = {}: --set train.global_batch_size={} (or a smaller micro batch)",
                                 t.global_batch_size, t.micro_batch_size, layout.data_ranks(), per_step,
                                 std::max(per_step, t.global_batch_size / per_step * per_step)));
  if ((layout.dp * layout.fsdp * layout.cp) % layout.ep != 0)
    throw InputError(fmt::format("parallel.ep {} does not divide the data ranks dp x fsdp x cp = {}", layout.ep,
                                 layout.dp * layout.fsdp * layout.cp));
  return layout;
}

}  // namespace xtrain::plan
