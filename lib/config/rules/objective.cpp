// Encoders learn masked tokens, decoders the next one; dpo learns from preference pairs, which a
// micro batch keeps whole on one rank and one process computes whole (docs/post-training.md).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "config/recipe_rule.h"
#include "model/spec/model_spec.h"

namespace xtrain::config::rules {

namespace {

void preference_rules(const RuleContext& c) {
  const auto& r = c.recipe;
  const char* fix = "data.objective dpo runs on data, fully sharded and expert parallelism only";
  if (r.train.micro_batch_size % 2 != 0)
    c.refuse("train.micro_batch_size",
             fmt::format("data.objective dpo reads preference pairs as two rows each (chosen, rejected): set an even "
                         "train.micro_batch_size (2 x pairs), not {}",
                         r.train.micro_batch_size));
  if (r.data.train.size() < 6 || r.data.train.compare(r.data.train.size() - 6, 6, ".jsonl") != 0)
    c.refuse("data.train", "data.objective dpo reads one .jsonl file of {\"prompt\", \"chosen\", \"rejected\"} "
                           "records (docs/post-training.md)");
  if (!r.data.eval.empty()) c.refuse("data.eval", "data.objective dpo has no evaluation yet: leave data.eval empty");
  if (r.data.pack) c.refuse("data.pack", "data.objective dpo pads each completion to its own row: set data.pack false");
  if (r.data.balance_window != 0)
    c.refuse("data.balance_window", "data.objective dpo keeps each pair's rows together: set data.balance_window 0");
  const std::pair<const char*, int64_t> layouts[] = {{"parallel.tp", r.parallel.tp},
                                                     {"parallel.pp", r.parallel.pp},
                                                     {"parallel.cp", r.parallel.cp}};
  for (const auto& [key, degree] : layouts)
    if (degree != 1) c.refuse(key, fmt::format("{}: set {} 1", fix, key));
  if (r.model.mtp_layers > 0) c.refuse("model.mtp_layers", "data.objective dpo has no multi-token prediction: set 0");
  if (r.dpo.label_smoothing != 0 && r.dpo.loss != DpoLoss::sigmoid)
    c.refuse("dpo.label_smoothing", "label smoothing applies to dpo.loss sigmoid only: set 0");
}

}  // namespace

// An encoder-decoder learns span corruption, which only it can: the rows are fixed lengths of
// encoder and decoder tokens, never packed.
void span_corruption_rules(const RuleContext& c, const model::ModelSpec* spec) {
  const auto& r = c.recipe;
  const bool encoder_decoder = spec && spec->capabilities.encoder_decoder;
  if (encoder_decoder && r.data.objective != Objective::span_corruption)
    c.refuse("data.objective", fmt::format("model.family {} is an encoder-decoder trained on span corruption: set "
                                           "data.objective span_corruption",
                                           r.model.family));
  if (r.data.objective != Objective::span_corruption) return;
  if (!encoder_decoder) {
    std::vector<std::string> families;
    for (const auto& other : model::model_specs())
      if (other.capabilities.encoder_decoder) families.push_back(other.family);
    c.refuse("data.objective", fmt::format("span_corruption trains an encoder-decoder, and model.family {} is not "
                                           "one: set model.family {}",
                                           r.model.family, fmt::join(families, " or ")));
  }
  if (r.data.pack)
    c.refuse("data.pack", "data.objective span_corruption makes rows of fixed encoder and decoder lengths: set "
                          "data.pack false");
}

void objective(const RuleContext& c) {
  const auto& family = c.recipe.model.family;
  const auto* spec = model::find_model_spec(family);
  if (spec && spec->capabilities.image_classes) return;  // rules/image_classes.cpp
  if (spec && spec->capabilities.contrastive) return;    // rules/contrastive.cpp
  if ((spec && spec->capabilities.encoder_decoder) || c.recipe.data.objective == Objective::span_corruption)
    return span_corruption_rules(c, spec);
  const bool encoder = spec && !spec->capabilities.causal;
  const auto chosen = c.recipe.data.objective;
  if (chosen == Objective::mlm && !encoder) {
    std::vector<std::string> encoders;
    for (const auto& other : model::model_specs())
      if (!other.capabilities.causal && !other.capabilities.image_classes && !other.capabilities.encoder_decoder &&
          !other.capabilities.contrastive)
        encoders.push_back(other.family);
    c.refuse("data.objective",
             fmt::format("mlm trains an encoder, and model.family {} is a decoder: set model.family {}, or "
                         "data.objective clm",
                         family, fmt::join(encoders, " or ")));
  }
  if (chosen == Objective::dpo && !encoder) preference_rules(c);
  if (encoder && chosen != Objective::mlm)
    c.refuse("model.family",
             fmt::format("{} is an encoder trained on masked tokens: set data.objective mlm", family));
}

}  // namespace xtrain::config::rules
