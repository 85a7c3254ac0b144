// LoRA (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models"), as PEFT computes
// it: a linear layer named by targets computes y = x W^T + b + (alpha / rank) (dropout(x) A^T) B^T, A of
// [rank, in] and B of [out, rank]; W and b, like every other base weight, stay frozen and only
// A and B train. B starts at zero, so an adapted model starts as its base.
//
// Torch-free: the recipe (model.lora.*) and the checkpoint's config.json ("xtrain_lora", the
// adapters' settings, which export turns into PEFT's adapter_config.json) read it; the layers
// that compute it are model/layers/lora.h's.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace xtrain::model {

struct ModelConfig;
struct ModelSpec;

struct LoraConfig {
  int64_t rank = 8;
  double alpha = 16;
  double dropout = 0;                // on each adapter's input, in training (keyed masks)
  std::vector<std::string> targets;  // module names (q_proj, ...); none: no adapters
  bool enabled() const { return !targets.empty(); }
  double scale() const { return alpha / static_cast<double>(rank); }
};

// The config.json key under which a checkpoint keeps its adapters' settings.
inline constexpr const char* kLoraConfigKey = "xtrain_lora";

// The linear layers of a model of `config`'s family and shape that adapters can wrap, by module
// name (ModelSpec::lora_targets); none for the families that take no adapters.
std::vector<std::string> lora_target_modules(const ModelSpec& spec, const ModelConfig& config);

// Whether a parameter name is an adapter's (".lora_A." or ".lora_B.").
bool is_lora_parameter(const std::string& name);

// The settings as PEFT's adapter_config.json names them (r, lora_alpha, lora_dropout,
// target_modules), and back: std::nullopt when `config` has no kLoraConfigKey; an InputError
// naming `source` when its entry is malformed.
nlohmann::json lora_to_json(const LoraConfig& lora);
std::optional<LoraConfig> lora_from_config(const nlohmann::json& config, const std::string& source);

}  // namespace xtrain::model
