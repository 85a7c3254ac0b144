#include "model/spec/hf_config.h"

#include <filesystem>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "model/spec/llama_family.h"
#include "model/spec/model_spec.h"
#include "util/durable_file.h"
#include "util/input_error.h"

namespace xtrain::ckpt {

namespace {

// Fields transformers reads that xtrain does not compute: what the imported config says stands.
// xtrain's own value fills in only where it said nothing (absent, or null as transformers writes
// an unset token id).
const std::set<std::string> kKeptAsImported = {
    "bos_token_id",         "eos_token_id",        "pad_token_id", "use_cache",
    "output_router_logits", "router_jitter_noise", "attention_dropout", "hidden_dropout_prob",
    "attention_probs_dropout_prob", "dropout", "dropout_rate"};

// Another spelling of a field xtrain writes (transformers 5's and 4.x's): dropped from the
// imported object, so that the file does not say one thing twice (rope_theta and rope_scaling
// are written in 4.x's form, which both read; the weights xtrain writes are float32).
const std::pair<const char*, const char*> kOtherSpellings[] = {
    {"rope_theta", "rope_parameters"},   {"rope_scaling", "rope_parameters"}, {"torch_dtype", "dtype"},
    {"num_experts", "num_local_experts"}, {"num_local_experts", "num_experts"}, {"image_token_index", "image_token_id"}};

// The sub-configs of a composite model (llava), merged field by field as the top level is.
const std::set<std::string> kSubConfigs = {"text_config", "vision_config"};

nlohmann::json merge(nlohmann::json imported, const nlohmann::json& computed) {
  if (!imported.is_object()) return computed;
  imported.erase("xtrain_unexported");  // xtrain's own note, rewritten from the options of this run
  // The weights xtrain writes are float, dequantized on import (ckpt/quantized_weights.h): a
  // quantization_config kept would make transformers look for FP8 scales or FP4 blocks.
  imported.erase("quantization_config");
  for (const auto& [field, other] : kOtherSpellings)
    if (computed.contains(field) && !computed.contains(other)) imported.erase(other);
  for (const auto& [key, value] : computed.items()) {
    const auto it = imported.find(key);
    if (it != imported.end() && kKeptAsImported.count(key) && !it->is_null()) continue;
    if (it != imported.end() && kSubConfigs.count(key) && it->is_object() && value.is_object()) {
      *it = merge(*it, value);
      continue;
    }
    imported[key] = value;
  }
  return imported;
}

}  // namespace

nlohmann::json hf_config(const model::ModelConfig& config, int64_t eos_token_id, const nlohmann::json& imported) {
  auto json = merge(imported, model::model_spec(config.family).to_hf_config(config, eos_token_id));
  // transformers' coefficient is xtrain's divided by top k: the imported number, when it is what
  // xtrain trained with, is written as it was rather than through a division that may round.
  if (config.num_experts_per_tok > 0 && imported.is_object()) {
    const auto coef = imported.find("router_aux_loss_coef");
    if (coef != imported.end() && coef->is_number() &&
        model::router_aux_loss_coef_from_hf(coef->get<double>(), config.num_experts_per_tok) ==
            config.router_aux_loss_coef)
      json["router_aux_loss_coef"] = *coef;
  }
  return json;
}

model::ModelConfig model_config_from_hf(const nlohmann::json& config, const std::string& source) {
  if (!config.is_object()) throw InputError(fmt::format("{}: not a JSON object", source));
  return model::model_spec_for_hf(config, source).from_hf_config(config, source);
}

nlohmann::json read_hf_config(const std::string& dir) {
  const std::string path = dir + "/config.json";
  if (!std::filesystem::is_regular_file(path))
    throw InputError(fmt::format("{}: not found; a Hugging Face model folder holds config.json and "
                                 "model.safetensors (or model.safetensors.index.json and its files)",
                                 path));
  // Settings of a few KB: a file of hundreds of MB (weights under the wrong name) would take
  // gigabytes once parsed.
  constexpr uintmax_t kMaxConfigBytes = 16'000'000;
  if (const auto size = std::filesystem::file_size(path); size > kMaxConfigBytes)
    throw InputError(fmt::format("{}: the file is {:.1f} MB; a config.json holds the model's settings, a few KB (is "
                                 "it another file under this name?)",
                                 path, static_cast<double>(size) / 1e6));
  try {
    return nlohmann::json::parse(util::read_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: invalid JSON: {}", path, e.what()));
  }
}

nlohmann::json hf_generation_config(const nlohmann::json& config) {
  const auto eos = config.find("eos_token_id");
  if (eos == config.end() || eos->is_null()) return nullptr;
  const auto bos = config.find("bos_token_id");
  return {{"_from_model_config", true},
          {"bos_token_id", bos == config.end() || bos->is_null() ? *eos : *bos},
          {"eos_token_id", *eos}};
}

std::vector<HfDropout> hf_dropout(const nlohmann::json& config) {
  // Mixtral's router jitter is training noise of the same kind: multiplicative, off in eval.
  static const char* const kFields[] = {"attention_dropout", "hidden_dropout_prob", "attention_probs_dropout_prob",
                                        "hidden_dropout",    "activation_dropout",  "dropout",
                                        "dropout_rate",      "router_jitter_noise"};
  std::vector<HfDropout> found;
  auto scan = [&](const nlohmann::json& object, const std::string& prefix) {
    if (!object.is_object()) return;
    for (const char* field : kFields) {
      const auto it = object.find(field);
      if (it != object.end() && it->is_number() && it->get<double>() != 0)
        found.push_back({prefix + field, it->get<double>()});
    }
  };
  scan(config, "");
  if (config.is_object())
    for (const auto& sub : kSubConfigs)
      if (config.contains(sub)) scan(config.at(sub), sub + ".");
  return found;
}

std::string describe(const std::vector<HfDropout>& dropout) {
  std::string text;
  for (const auto& d : dropout) text += fmt::format("{}{} {}", text.empty() ? "" : ", ", d.field, d.value);
  return text;
}

}  // namespace xtrain::ckpt
