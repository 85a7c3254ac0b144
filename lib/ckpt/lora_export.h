// A LoRA run's checkpoint (model/spec/lora_config.h) as a Hugging Face export: either merged,
// each adapted weight W replaced by W + (alpha / r) B A so that a plain transformers folder
// computes what the adapted model did, or the adapters alone as PEFT saves them
// (adapter_model.safetensors under PEFT's names, "base_model.model.<HF name>", and
// adapter_config.json), which peft.PeftModel.from_pretrained loads onto the base.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "ckpt/safetensors.h"
#include "model/spec/lora_config.h"
#include "model/spec/model_spec.h"

namespace xtrain::ckpt {

// Folds every adapter of `tensors` (model names) into its layer's weight, computed in float64
// and rounded once to the weight's dtype, and removes the adapters. Returns the weights merged.
int64_t merge_lora(TensorMap& tensors, const model::LoraConfig& lora);

// The adapters of `tensors` under PEFT's tensor names (contiguous, as stored).
TensorMap peft_adapter_tensors(const TensorMap& tensors, const model::ModelSpec& spec);

// PEFT's adapter_config.json for these adapters on base_model (a folder or a Hub name).
nlohmann::ordered_json peft_adapter_config(const model::LoraConfig& lora, const std::string& base_model);

}  // namespace xtrain::ckpt
