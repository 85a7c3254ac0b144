#include "model/spec/lora_config.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/spec/model_spec.h"
#include "util/input_error.h"

namespace xtrain::model {

std::vector<std::string> lora_target_modules(const ModelSpec& spec, const ModelConfig& config) {
  return spec.lora_targets ? spec.lora_targets(config) : std::vector<std::string>{};
}

bool is_lora_parameter(const std::string& name) {
  return name.find(".lora_A.") != std::string::npos || name.find(".lora_B.") != std::string::npos;
}

nlohmann::json lora_to_json(const LoraConfig& lora) {
  return {{"r", lora.rank}, {"lora_alpha", lora.alpha}, {"lora_dropout", lora.dropout}, {"target_modules", lora.targets}};
}

std::optional<LoraConfig> lora_from_config(const nlohmann::json& config, const std::string& source) {
  if (!config.is_object() || !config.contains(kLoraConfigKey)) return std::nullopt;
  const auto& entry = config.at(kLoraConfigKey);
  LoraConfig lora;
  try {
    lora.rank = entry.at("r").get<int64_t>();
    lora.alpha = entry.at("lora_alpha").get<double>();
    lora.dropout = entry.value("lora_dropout", 0.0);
    lora.targets = entry.at("target_modules").get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: \"{}\" must hold r, lora_alpha and target_modules ({})", source, kLoraConfigKey,
                                 e.what()));
  }
  if (lora.rank < 1 || lora.targets.empty())
    throw InputError(fmt::format("{}: \"{}\" needs r >= 1 and at least one target module, got {}", source,
                                 kLoraConfigKey, entry.dump()));
  return lora;
}

}  // namespace xtrain::model
