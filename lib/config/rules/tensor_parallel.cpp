// The model's shape splits over parallel.tp (model/layers/tensor_parallel_ops.h).
#include <fmt/format.h>

#include "config/recipe_rule.h"
#include "model/spec/model_spec.h"

namespace xtrain::config::rules {

namespace {

// Tensor parallelism splits a MoE layer's experts by expert over tp, and ep splits each tp
// rank's further (model/layers/moe.h); shared experts split as the dense MLP.
void tensor_parallel_experts(const RuleContext& c) {
  const auto& m = c.recipe.model;
  const auto& p = c.recipe.parallel;
  if (m.num_experts == 0) return;
  if (m.num_experts % (p.tp * p.ep) != 0)
    c.refuse("parallel.tp",
             p.ep > 1 ? fmt::format("{} x parallel.ep {} does not divide model.num_experts {}: each tensor- and "
                                    "expert-parallel rank holds the same number of experts",
                                    p.tp, p.ep, m.num_experts)
                      : fmt::format("{} does not divide model.num_experts {}: each tensor-parallel rank holds the same "
                                    "number of experts",
                                    p.tp, m.num_experts));
  if (m.num_shared_experts > 0 && (m.moe_intermediate_size * m.num_shared_experts) % p.tp != 0)
    c.refuse("parallel.tp", fmt::format("{} does not divide the shared experts' width, model.moe_intermediate_size {} x "
                                        "num_shared_experts {}",
                                        p.tp, m.moe_intermediate_size, m.num_shared_experts));
}

}  // namespace

void tensor_parallel(const RuleContext& c) {
  const auto& m = c.recipe.model;
  const auto& p = c.recipe.parallel;
  const int64_t tp = p.tp;
  if (p.sequence_parallel && tp == 1)
    c.refuse("parallel.sequence_parallel",
             "true splits activations over the tensor-parallel ranks, which needs parallel.tp above 1");
  if (tp <= 1) return;
  const auto* spec = model::find_model_spec(m.family);
  if (spec && !spec->capabilities.tensor_parallel)
    c.refuse("parallel.tp", fmt::format("{}: model.family {} is not split by tensor parallelism: leave it at 1 (use "
                                        "FSDP)",
                                        tp, m.family));
  // The encoders split their layers only (bert; t5, whose decoder blocks carry the encoder's
  // output whole beside their states: model/t5/t5.h).
  if (p.sequence_parallel && spec && !spec->capabilities.causal)
    c.refuse("parallel.sequence_parallel", fmt::format("true: model.family {} splits over parallel.tp without "
                                                       "sequence parallelism; set it false",
                                                       m.family));
  if (m.num_heads % tp != 0)
    c.refuse("parallel.tp",
             fmt::format("{} does not divide model.num_heads {}: each tensor-parallel rank computes whole heads", tp,
                         m.num_heads));
  else if (m.num_kv_heads > 0 && m.num_kv_heads % tp != 0 && tp % m.num_kv_heads != 0)
    c.refuse("parallel.tp",
             fmt::format("{} and model.num_kv_heads {}: kv heads are split when tp divides them and replicated when "
                         "they divide tp; neither holds",
                         tp, m.num_kv_heads));
  if (m.num_moe_layers() < m.num_layers && m.intermediate_size % tp != 0)
    c.refuse("parallel.tp", fmt::format("{} does not divide model.intermediate_size {}", tp, m.intermediate_size));
  tensor_parallel_experts(c);
  if (m.vocab_size > 0 && m.vocab_size < tp)
    c.refuse("parallel.tp", fmt::format("{} is more than the {} rows of the vocabulary", tp, m.vocab_size));
  if (p.sequence_parallel && c.recipe.data.seq_len % tp != 0)
    c.refuse("parallel.sequence_parallel",
             fmt::format("true splits each sequence over parallel.tp {} ranks, which does not divide data.seq_len {}",
                         tp, c.recipe.data.seq_len));
}

}  // namespace xtrain::config::rules
