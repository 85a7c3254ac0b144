// optim.muon.qk_clip_tau (optim/qk_clip.h): the layouts and attention it is defined on. The
// largest logits come from the eager kernel's scores (memory.attention naive); the heads' query
// and key rows must be their own (not latent attention's shared parts, and no q/k norm that
// would undo the scaling); the record and the scaling assume every rank holds every head of its
// layers (no tensor-parallel heads, pipeline stages or context-parallel rows).
#include <tuple>

#include <fmt/format.h>

#include "config/recipe_rule.h"
#include "model/spec/model_spec.h"

namespace xtrain::config::rules {

namespace {
void attention_of_family(const RuleContext& c) {
  const auto& family = c.recipe.model.family;
  const auto* spec = model::find_model_spec(family);
  if (!spec) return;
  const bool latent = family == "deepseek_v3";
  if (latent || spec->architecture != model::Architecture::llama_decoder)
    c.refuse("model.family", fmt::format("{}: optim.muon.qk_clip_tau clips the heads of grouped-query attention "
                                         "(llama, qwen2, mistral-like decoders); {}'s attention {}: set "
                                         "optim.muon.qk_clip_tau 0",
                                         family, family,
                                         latent ? "is latent (MLA), where the clip must leave the shared rotary key "
                                                  "alone and scale only the head-specific parts, which is not "
                                                  "implemented"
                                                : "is not a llama decoder's"));
  else if (spec->attention.qk_norm)
    c.refuse("model.family", fmt::format("{}: its q and k norms divide out any scale of the projections, so "
                                         "optim.muon.qk_clip_tau cannot lower the logits; set it to 0",
                                         family));
}
}  // namespace

void qk_clip(const RuleContext& c) {
  const auto& o = c.recipe.optim;
  if (o.muon.qk_clip_tau <= 0) return;
  if (o.name != Optimizer::muon)
    c.refuse("optim.muon.qk_clip_tau", fmt::format("{}: QK-clip runs after Muon's step; set optim.name muon or "
                                                   "optim.muon.qk_clip_tau 0",
                                                   o.muon.qk_clip_tau));
  if (c.recipe.memory.attention != memory::Attention::naive)
    c.refuse("memory.attention", fmt::format("{}: optim.muon.qk_clip_tau reads each head's largest logit from the "
                                             "naive kernel's scores, which the fused kernels do not expose; set "
                                             "memory.attention naive",
                                             memory::to_string(c.recipe.memory.attention)));
  const auto& p = c.recipe.parallel;
  for (const auto& [key, degree, why] :
       {std::tuple<const char*, int64_t, const char*>{"parallel.tp", p.tp, "splits the heads over ranks"},
        {"parallel.pp", p.pp, "splits the layers over stages"},
        {"parallel.cp", p.cp, "attends with its own kernels"}})
    if (degree > 1)
      c.refuse(key, fmt::format("{}: optim.muon.qk_clip_tau is implemented where every rank holds all heads of "
                                "every layer (DDP, FSDP, HSDP, experts), and this {}; leave it at 1 or set "
                                "optim.muon.qk_clip_tau 0",
                                degree, why));
  attention_of_family(c);
}

}  // namespace xtrain::config::rules
