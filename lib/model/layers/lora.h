// LoRA adapters on a model's linear layers (model/spec/lora_config.h): each Linear of the family's
// own listing (model/layers/float8_user.h: every linear layer but the output head and the gates)
// whose module name ends in one of the targets gets lora_A and lora_B (model/layers/linear.h),
// named as PEFT names them under the layer ("model.layers.0.self_attn.q_proj.lora_A.weight").
// The model is still unmaterialised; its init plan covers the adapters. Which weights train is
// the trainer's business (every parameter but is_lora_parameter's is frozen there).
#pragma once
#include <cstdint>

#include "model/layers/float8_user.h"
#include "model/spec/lora_config.h"

namespace xtrain::model {

// Adds the adapters; returns the number of layers adapted. A target that names no Linear of the
// model is std::invalid_argument (the recipe check refuses it first, naming the key).
int64_t add_lora_adapters(Float8User& model, const LoraConfig& lora);

}  // namespace xtrain::model
