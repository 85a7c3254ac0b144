#include "train/model_factory.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ckpt/folder_weights.h"
#include "ckpt/manifest.h"
#include "model/model_builder.h"
#include "model/layers/lora.h"
#include "model/layers/parameter_init.h"
#include "util/input_error.h"

namespace xtrain::train {

std::shared_ptr<model::CausalLM> build_model(const config::Recipe& recipe) {
  auto model = model::declare_model(recipe.model);
  if (recipe.model.lora.enabled()) model::add_lora_adapters(*model, recipe.model.lora, model->adapter_dropout_key());
  return model;
}

InitialWeights initial_weights(const config::Recipe& recipe, const model::CausalLM& model, bool fresh) {
  const std::string& init_from = recipe.model.init_from;
  if (init_from.empty() || !fresh)
    return {model::init_source(model.init_plan(), static_cast<uint64_t>(recipe.run.seed)),
            fmt::format("run.seed {}", recipe.run.seed), {}};
  const std::string dir = init_from.substr(3);  // "hf:" checked by the option
  // A folder xtrain exported carries a manifest: damage is found before it is trained on.
  const auto check = ckpt::verify_manifest(dir);
  if (!check.usable()) throw InputError(fmt::format("model.init_from {}: {}", init_from, check.summary()));
  // With adapters the folder holds the base alone: its weights come from there, the adapters'
  // from run.seed's init.
  const bool adapters = recipe.model.lora.enabled();
  auto weights = ckpt::folder_weights(dir, adapters ? *model::declare_model(recipe.model) : model);
  if (adapters)
    weights.source = [folder = std::move(weights.source),
                      init = model::init_source(model.init_plan(), static_cast<uint64_t>(recipe.run.seed))](
                         const std::string& name, int64_t begin, int64_t count) {
      return model::is_lora_parameter(name) ? init(name, begin, count) : folder(name, begin, count);
    };
  // Only a plain Hugging Face folder gets here without a manifest (manifest.h): the log says so.
  const std::string unverified =
      check.status == ckpt::ManifestCheck::Status::no_manifest ? "; " + check.summary() : "";
  nlohmann::json expert_bias;
  for (const auto& [name, tensor] : weights.buffers) {
    const auto values = tensor.contiguous();
    expert_bias[name] = std::vector<float>(values.data_ptr<float>(), values.data_ptr<float>() + values.numel());
  }
  const std::string dequantized =
      weights.dequantized > 0 ? fmt::format(", {} of them {} dequantized", weights.dequantized, weights.quantization) : "";
  return {std::move(weights.source),
          fmt::format("{} ({} tensors{}{})", init_from, weights.tensors, dequantized, unverified),
          std::move(expert_bias)};
}

}  // namespace xtrain::train
