// An encoder-decoder's own shape (model.feed_forward, model.num_decoder_layers,
// model.relative_buckets, model.relative_max_distance): read by t5 only, so any other family
// accepts only their defaults rather than ignoring a value asked for; t5's buckets must leave
// room for the logarithmic ones, as the Hugging Face import requires of a folder.
#include <string>

#include <fmt/format.h>

#include "config/recipe_rule.h"
#include "model/spec/model_spec.h"

namespace xtrain::config::rules {

void encoder_decoder(const RuleContext& c) {
  const auto& m = c.recipe.model;
  const auto& ed = m.encoder_decoder;
  const auto* spec = model::find_model_spec(m.family);
  if (!spec) return;
  if (!spec->capabilities.encoder_decoder) {
    const model::EncoderDecoderConfig defaults;
    auto only = [&](const char* key, bool differs, const std::string& value, const std::string& fix) {
      if (differs)
        c.refuse(key, fmt::format("{}: model.family {} has no encoder-decoder stacks (t5 has); {}", value, m.family,
                                  fix));
    };
    only("model.feed_forward", ed.gated_gelu, "gated-gelu", "leave it at relu");
    only("model.num_decoder_layers", ed.decoder_layers != defaults.decoder_layers,
         std::to_string(ed.decoder_layers), "leave it at 0");
    only("model.relative_buckets", ed.relative_buckets != defaults.relative_buckets,
         std::to_string(ed.relative_buckets), fmt::format("leave it at {}", defaults.relative_buckets));
    only("model.relative_max_distance", ed.relative_max_distance != defaults.relative_max_distance,
         std::to_string(ed.relative_max_distance), fmt::format("leave it at {}", defaults.relative_max_distance));
    return;
  }
  if (ed.relative_max_distance <= ed.relative_buckets / 4)
    c.refuse("model.relative_max_distance",
             fmt::format("{} leaves no logarithmic buckets of model.relative_buckets {}: set more than {}",
                         ed.relative_max_distance, ed.relative_buckets, ed.relative_buckets / 4));
}

}  // namespace xtrain::config::rules
