// The pipeline's stages and schedule fit the model and the batch.
#include <stdexcept>

#include <fmt/format.h>

#include "config/pipeline_layout.h"
#include "config/recipe_rule.h"
#include "model/spec/model_spec.h"

namespace xtrain::config::rules {

void pipeline(const RuleContext& c) {
  const auto& m = c.recipe.model;
  const auto& p = c.recipe.parallel;
  const int64_t v = p.pp_virtual_stages;
  if (v_shaped(p.pp_schedule) && v != 2)
    c.refuse("parallel.pp_virtual_stages",
             fmt::format("{}: {} places two chunks on each rank, in a V (rank r runs chunks r and 2 pp - 1 - r): set "
                         "parallel.pp_virtual_stages 2",
                         v, to_string(p.pp_schedule)));
  else if (v > 1 && p.pp_schedule != PpSchedule::interleaved_1f1b && !v_shaped(p.pp_schedule))
    c.refuse("parallel.pp_virtual_stages",
             fmt::format("{} chunks per rank need parallel.pp_schedule interleaved_1f1b, zbv or dualpipev (it is {})",
                         v, to_string(p.pp_schedule)));
  if (p.pp <= 1) {
    if (!p.pp_layers.empty())
      c.refuse("parallel.pp_layers", "cuts pipeline stages, and parallel.pp is 1: leave it out");
    return;
  }
  // Each stage runs its layers only: a balancing loss whose gradient in one layer needs every
  // layer's counts, or every data rank's, is not computed by any of them.
  if (m.num_experts > 0 && m.router_aux_loss_coef > 0 && m.router_aux_loss_scope == model::AuxLossScope::model)
    c.refuse("model.router_aux_loss_scope",
             fmt::format("model balances over every layer's routing at once, which parallel.pp {} splits over its "
                         "stages: set model.router_aux_loss_scope layer (each layer's own balancing loss)",
                         p.pp));
  if (m.num_experts > 0 && m.router_aux_loss_coef > 0 && m.router_aux_loss_global_average)
    c.refuse("model.router_aux_loss_global_average",
             fmt::format("true defers the balancing loss to the end of the forward, which no stage of parallel.pp {} "
                         "runs whole: set it false (each micro batch's counts)",
                         p.pp));
  const auto* spec = model::find_model_spec(m.family);
  if (spec && !spec->capabilities.pipeline)
    c.refuse("parallel.pp",
             fmt::format("{}: model.family {} is not split into pipeline stages: leave it at 1 (use FSDP)", p.pp,
                         m.family));
  if (p.pp_schedule == PpSchedule::interleaved_1f1b && v < 2)
    c.refuse("parallel.pp_virtual_stages", "interleaved_1f1b needs at least 2 chunks per rank");
  if (splits_backward(p.pp_schedule)) {
    const char* name = to_string(p.pp_schedule);
    if (p.fsdp > 1)
      c.refuse("parallel.fsdp", fmt::format("{}: {} defers the weight gradients past each block's backward, where "
                                            "FSDP reduce-scatters them: set parallel.fsdp 1 (parallel.dp replicates "
                                            "the stages) or parallel.pp_schedule 1f1b",
                                            p.fsdp, name));
  }
  const auto& t = c.recipe.train;
  const int64_t needed = min_micro_batches(p.pp_schedule, p.pp);
  if (needed > 1 && p.dp > 0 && p.fsdp > 0 && t.micro_batch_size > 0 &&
      t.global_batch_size % (t.micro_batch_size * p.dp * p.fsdp) == 0) {
    const int64_t micro_batches = t.global_batch_size / (t.micro_batch_size * p.dp * p.fsdp);
    if (micro_batches < needed)
      c.refuse("train.global_batch_size", min_micro_batches_problem(p.pp_schedule, p.pp, micro_batches));
  }
  const int64_t chunks = p.pp * v;
  if (!p.pp_layers.empty()) {
    const bool encoder_decoder = spec && spec->capabilities.encoder_decoder;
    const int64_t layers = m.num_layers + (encoder_decoder ? m.encoder_decoder.decoder_depth(m.num_layers) : 0);
    try {
      pipeline_chunks(layers, chunks, 0, p.pp_layers);
    } catch (const std::invalid_argument& e) {
      c.refuse("parallel.pp_layers", e.what());
    }
    return;
  }
  if (m.num_layers + 2 < chunks)
    c.refuse("parallel.pp", fmt::format("{} x {} chunks for {} layers and the embedding and head: each chunk needs "
                                        "one of them",
                                        p.pp, v, m.num_layers));
}

}  // namespace xtrain::config::rules
