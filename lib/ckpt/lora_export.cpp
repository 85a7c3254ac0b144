#include "ckpt/lora_export.h"

#include <cmath>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>
#include <torch/torch.h>

namespace xtrain::ckpt {

namespace {
const std::string kLoraA = ".lora_A.weight";

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

int64_t merge_lora(TensorMap& tensors, const model::LoraConfig& lora) {
  std::vector<std::string> layers;  // "model.layers.0.self_attn.q_proj"
  for (const auto& [name, tensor] : tensors)
    if (ends_with(name, kLoraA)) layers.push_back(name.substr(0, name.size() - kLoraA.size()));
  torch::NoGradGuard no_grad;
  for (const auto& layer : layers) {
    const auto a = tensors.find(layer + kLoraA), b = tensors.find(layer + ".lora_B.weight");
    const auto weight = tensors.find(layer + ".weight");
    if (b == tensors.end() || weight == tensors.end())
      throw std::runtime_error(fmt::format("{}: an adapter without its lora_B or base weight", layer));
    const auto delta = torch::matmul(b->second.to(torch::kFloat64), a->second.to(torch::kFloat64)) * lora.scale();
    weight->second = (weight->second.to(torch::kFloat64) + delta).to(weight->second.scalar_type());
    tensors.erase(a);
    tensors.erase(b);
  }
  return static_cast<int64_t>(layers.size());
}

TensorMap peft_adapter_tensors(const TensorMap& tensors, const model::ModelSpec& spec) {
  TensorMap adapters;
  for (const auto& [name, tensor] : tensors)
    if (model::is_lora_parameter(name)) adapters["base_model.model." + spec.to_hf_name(name)] = tensor.contiguous();
  return adapters;
}

nlohmann::ordered_json peft_adapter_config(const model::LoraConfig& lora, const std::string& base_model) {
  return {{"peft_type", "LORA"},
          {"task_type", "CAUSAL_LM"},
          {"base_model_name_or_path", base_model},
          {"r", lora.rank},
          // An integer as PEFT writes one (lora_alpha: int), a fraction as it is.
          {"lora_alpha", lora.alpha == std::floor(lora.alpha) ? nlohmann::ordered_json(static_cast<int64_t>(lora.alpha))
                                                              : nlohmann::ordered_json(lora.alpha)},
          {"lora_dropout", lora.dropout},
          {"target_modules", lora.targets},
          {"bias", "none"},
          {"fan_in_fan_out", false},
          {"inference_mode", true},
          {"init_lora_weights", true},
          {"use_rslora", false},
          {"use_dora", false},
          {"modules_to_save", nullptr},
          {"layers_to_transform", nullptr},
          {"rank_pattern", nlohmann::ordered_json::object()},
          {"alpha_pattern", nlohmann::ordered_json::object()}};
}

}  // namespace xtrain::ckpt
