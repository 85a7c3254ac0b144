// Context parallelism's head-tail chunks divide the sequence, and Ulysses' heads divide over
// its ranks; inside pipeline stages, every schedule but zb_h1 runs it.
#include <fmt/format.h>

#include "config/pipeline_layout.h"
#include "config/recipe_rule.h"
#include "model/spec/model_spec.h"

namespace xtrain::config::rules {

void context_parallel(const RuleContext& c) {
  const auto& m = c.recipe.model;
  const auto& p = c.recipe.parallel;
  const int64_t cp = p.cp, seq = c.recipe.data.seq_len;
  if (cp <= 1) return;
  if (const auto* spec = model::find_model_spec(m.family); spec && !spec->capabilities.context_parallel)
    c.refuse("parallel.cp",
             fmt::format("{}: model.family {} does not split its sequences over ranks: leave it at 1", cp, m.family));
  // Inside pipeline stages the cp ranks share the stage's parameters (sharded over fsdp x cp),
  // whose gradients reduce-scatter after each block's backward: zb_h1's and zbv's deferred
  // weight gradients would come after it.
  if (p.pp > 1 && splits_backward(p.pp_schedule))
    c.refuse("parallel.pp_schedule",
             fmt::format("{} defers the weight gradients past each block's backward, where the parallel.cp {} "
                         "ranks of a stage, sharing its parameters, reduce-scatter them: use 1f1b, gpipe or "
                         "interleaved_1f1b with context parallelism",
                         to_string(p.pp_schedule), cp));
  if (seq % (2 * cp) != 0)
    c.refuse("parallel.cp", fmt::format("{} cuts each sequence into 2 x cp = {} chunks (head-tail), which does not "
                                        "divide data.seq_len {}: make data.seq_len a multiple of {}",
                                        cp, 2 * cp, seq, 2 * cp));
  else if (p.sequence_parallel && (seq / cp) % p.tp != 0)
    c.refuse("parallel.sequence_parallel",
             fmt::format("true splits each cp rank's {} tokens of a sequence over parallel.tp {}, which does not "
                         "divide them",
                         seq / cp, p.tp));
  const int64_t kv = m.num_kv_heads > 0 ? m.num_kv_heads : m.num_heads;
  if (p.cp_kind == parallel::ContextKind::ulysses && p.tp > 0 && m.num_heads % p.tp == 0 &&
      ((m.num_heads / p.tp) % cp != 0 || kv % p.tp != 0 || (kv / p.tp) % cp != 0))
    c.refuse("parallel.cp_kind",
             fmt::format("ulysses splits the heads over parallel.cp {}: model.num_heads {} and num_kv_heads {}{} must "
                         "divide by it; set parallel.cp_kind ring, or a cp that divides the heads",
                         cp, m.num_heads, kv, p.tp > 1 ? fmt::format(" per tensor-parallel rank (tp {})", p.tp) : ""));
}

}  // namespace xtrain::config::rules
