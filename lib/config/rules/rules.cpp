// The table of every feature's recipe rules (config/recipe_rule.h), one file each in this
// folder. A table rather than self-registration: a static library drops the object files that
// nothing names, and with them their registrations. The order is the order problems are listed.
#include "config/recipe_rule.h"

namespace xtrain::config {

namespace rules {
void attention_heads(const RuleContext&);
void experts(const RuleContext&);
void tensor_parallel(const RuleContext&);
void pipeline(const RuleContext&);
void context_parallel(const RuleContext&);
void multi_token_prediction(const RuleContext&);
void float8(const RuleContext&);
void freeze(const RuleContext&);
void dropout(const RuleContext&);
void encoder_decoder(const RuleContext&);
void lora(const RuleContext&);
void onebit_adam(const RuleContext&);
void qk_clip(const RuleContext&);
void objective(const RuleContext&);
void grpo(const RuleContext&);
void vocabulary(const RuleContext&);
void rope_scaling(const RuleContext&);
void sequence_length(const RuleContext&);
void batch_geometry(const RuleContext&);
void activation_offload(const RuleContext&);
void learning_rate(const RuleContext&);
void vision_tower(const RuleContext&);
void image_classes(const RuleContext&);
void contrastive(const RuleContext&);
}  // namespace rules

const std::vector<FeatureRule>& recipe_rules() {
  static const std::vector<FeatureRule> table = {
      {"attention_heads", rules::attention_heads},
      {"experts", rules::experts},
      {"tensor_parallel", rules::tensor_parallel},
      {"pipeline", rules::pipeline},
      {"context_parallel", rules::context_parallel},
      {"multi_token_prediction", rules::multi_token_prediction},
      {"float8", rules::float8},
      {"freeze", rules::freeze},
      {"dropout", rules::dropout},
      {"encoder_decoder", rules::encoder_decoder},
      {"lora", rules::lora},
      {"onebit_adam", rules::onebit_adam},
      {"qk_clip", rules::qk_clip},
      {"objective", rules::objective},
      {"grpo", rules::grpo},
      {"vocabulary", rules::vocabulary},
      {"rope_scaling", rules::rope_scaling},
      {"sequence_length", rules::sequence_length},
      {"batch_geometry", rules::batch_geometry},
      {"activation_offload", rules::activation_offload},
      {"learning_rate", rules::learning_rate},
      {"vision_tower", rules::vision_tower},
      {"image_classes", rules::image_classes},
      {"contrastive", rules::contrastive},
  };
  return table;
}

void apply_recipe_rules(const RuleContext& context) {
  for (const auto& rule : recipe_rules()) rule.check(context);
}

}  // namespace xtrain::config
