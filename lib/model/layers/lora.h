// LoRA adapters on a model's linear layers (model/spec/lora_config.h): each Linear of the family's
// own listing (model/layers/float8_user.h: every linear layer but the output head and the gates)
// whose module name ends in one of the targets gets lora_A and lora_B (model/layers/linear.h),
// named as PEFT names them under the layer ("model.layers.0.self_attn.q_proj.lora_A.weight").
// The model is still unmaterialised; its init plan covers the adapters. Which weights train is
// the trainer's business (every parameter but is_lora_parameter's is frozen there). With
// lora.dropout, each adapter drops its input with keyed masks (model/layers/keyed_dropout.h) of
// the decoder layer's index and the module's name (adapter_site), keyed as `key` holds when it
// runs (the model's forward sets it: CausalLM::adapter_dropout_key).
#pragma once
#include <cstdint>
#include <memory>

#include "model/layers/float8_user.h"
#include "model/layers/keyed_dropout.h"
#include "model/spec/lora_config.h"

namespace xtrain::model {

// Adds the adapters; returns the number of layers adapted. A target that names no Linear of the
// model is std::invalid_argument (the recipe check refuses it first, naming the key).
// With dropout, a layer outside the decoder layers ("layers.N." in its name) is invalid_argument.
int64_t add_lora_adapters(Float8User& model, const LoraConfig& lora, std::shared_ptr<const DropoutKey> key);

}  // namespace xtrain::model
