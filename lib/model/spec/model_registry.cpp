// The registry of model families. A new family adds its spec's line here. Torch-free: the
// recipe checks and the fuzz targets read it; building a model is the specs' own business.
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "model/spec/bert_family.h"
#include "model/spec/clip_family.h"
#include "model/spec/deepseek_family.h"
#include "model/spec/gpt_oss_family.h"
#include "model/spec/llama_family.h"
#include "model/spec/llava_family.h"
#include "model/spec/model_spec.h"
#include "model/spec/t5_family.h"
#include "model/spec/vit_family.h"
#include "util/input_error.h"

namespace xtrain::model {

const std::vector<ModelSpec>& model_specs() {
  static const std::vector<ModelSpec> specs = {llama_spec(), qwen2_spec(), qwen3_spec(), qwen3_moe_spec(),
                                                 mixtral_spec(), deepseek_v3_spec(), gpt_oss_spec(), bert_spec(), llava_spec(),
                                                 vit_spec(), t5_spec(), clip_spec()};
  return specs;
}

std::vector<std::pair<std::string, std::vector<int64_t>>> hf_stored_tensors(const ModelSpec& spec,
                                                                           const std::string& name,
                                                                           const std::vector<int64_t>& shape) {
  // A one-element parameter whose hf_parts names one tensor is stored as a scalar (clip's
  // logit_scale, shape [] in transformers; a parameter of no dimensions would have no shard).
  if (spec.hf_parts && shape == std::vector<int64_t>{1})
    if (const auto scalar = spec.hf_parts(name, 1); scalar.size() == 1) return {{scalar.front(), {}}};
  const auto parts = spec.hf_parts && shape.size() >= 2 ? spec.hf_parts(name, shape[0]) : std::vector<std::string>{};
  if (parts.empty()) return {{spec.to_hf_name(name), shape}};
  const auto per_first = static_cast<int64_t>(parts.size()) / shape[0];
  std::vector<int64_t> part_shape(shape.begin() + 1, shape.end());
  part_shape[0] /= per_first;
  std::vector<std::pair<std::string, std::vector<int64_t>>> stored;
  for (const auto& part : parts) stored.emplace_back(part, part_shape);
  return stored;
}

std::vector<std::string> model_families() {
  std::vector<std::string> names;
  for (const auto& spec : model_specs()) names.push_back(spec.family);
  return names;
}

const ModelSpec* find_model_spec(const std::string& family) {
  for (const auto& spec : model_specs())
    if (spec.family == family) return &spec;
  return nullptr;
}

const ModelSpec& model_spec(const std::string& family) {
  if (const auto* spec = find_model_spec(family)) return *spec;
  throw std::invalid_argument(
      fmt::format("unknown model family '{}' (families: {})", family, fmt::join(model_families(), ", ")));
}

const ModelSpec& model_spec_for_hf(const nlohmann::json& config, const std::string& source) {
  const std::string type = config.is_object() ? config.value("model_type", std::string()) : std::string();
  std::string architecture;
  if (config.is_object() && config.contains("architectures") && config.at("architectures").is_array() &&
      !config.at("architectures").empty() && config.at("architectures").at(0).is_string())
    architecture = config.at("architectures").at(0).get<std::string>();
  // transformers has always written model_type; a hand-written config without either is Llama's.
  if (type.empty() && architecture.empty()) return model_spec("llama");
  for (const auto& spec : model_specs())
    if (type.empty() ? architecture == spec.hf_architecture : type == spec.hf_model_type) return spec;
  std::vector<std::string> known;
  for (const auto& spec : model_specs()) known.push_back(fmt::format("{} ({})", spec.hf_model_type, spec.hf_architecture));
  throw InputError(fmt::format("{}: model_type \"{}\"{} is not a family xtrain trains: {}", source, type,
                               architecture.empty() ? "" : fmt::format(" ({})", architecture), fmt::join(known, ", ")));
}

}  // namespace xtrain::model
