// A contrastive image-text model (model.family clip) trains on (image, caption) pairs
// (data/image_text_dataset.h), its loss over the similarity of every image of the global batch
// with every caption of it. The negatives of a pair are the other pairs of the same step, so a
// step is one micro batch on each data-parallel rank (accumulation would give each micro batch
// its own, smaller set). parallel.tp, pp, cp and ep above 1 are refused by their own rules
// (tensor_parallel.cpp, pipeline.cpp, context_parallel.cpp, experts.cpp): clip's spec claims
// none of those capabilities.
// Its shape comes from a Hugging Face folder (the image tower has no recipe keys); data.seq_len is
// a caption's tokens, at most the text tower's positions. No evaluation yet: data.eval is refused.
// docs/models.md, Contrastive image-text.
#include <fmt/format.h>

#include "config/recipe_rule.h"
#include "model/spec/model_spec.h"

namespace xtrain::config::rules {

void contrastive(const RuleContext& c) {
  const auto& r = c.recipe;
  const auto* spec = model::find_model_spec(r.model.family);
  if (!spec || !spec->capabilities.contrastive) return;
  if (r.model.init_from.rfind("hf:", 0) != 0)
    c.refuse("model.family", fmt::format("{} takes its towers' shapes from a Hugging Face folder: set "
                                         "model.init_from: hf:DIR to a folder of a CLIPModel (config.json and "
                                         "model.safetensors)",
                                         r.model.family));
  if (r.data.objective != Objective::clm)
    c.refuse("data.objective", fmt::format("{} learns which caption is each image's: leave data.objective out (clm, "
                                           "the default)",
                                           r.model.family));
  if (r.data.pack) c.refuse("data.pack", "a contrastive model reads one caption a row: set data.pack false");
  // Evaluation scores next-token targets (train/evaluate.h); a clip run would reach it and fail
  // at its first eval.
  if (!r.data.eval.empty())
    c.refuse("data.eval", fmt::format("{} has no evaluation of held-out pairs yet: leave data.eval empty (an export's "
                                      "zero-shot accuracy: tools/reference/clip_pairs.py zero-shot)",
                                      r.model.family));
  if (r.model.max_seq_len > 0 && r.data.seq_len > r.model.max_seq_len)
    c.refuse("data.seq_len", fmt::format("captions of {} tokens; the text tower has {} positions: set data.seq_len "
                                         "{} or less",
                                         r.data.seq_len, r.model.max_seq_len, r.model.max_seq_len));
  const auto& p = r.parallel;
  const auto& t = r.train;
  if (p.dp > 0 && p.fsdp > 0 && t.global_batch_size != t.micro_batch_size * p.dp * p.fsdp)
    c.refuse("train.global_batch_size",
             fmt::format("{}'s negatives are the pairs of one step: the global batch must be one micro batch on "
                         "each data-parallel rank, train.micro_batch_size {} x {} ranks = {} (no accumulation)",
                         r.model.family, t.micro_batch_size, p.dp * p.fsdp, t.micro_batch_size * p.dp * p.fsdp));
}

}  // namespace xtrain::config::rules
