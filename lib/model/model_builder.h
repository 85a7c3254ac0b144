// Building the model of a family with LibTorch: its spec (model/spec/model_spec.h, torch-free) names
// the layers (ModelSpec::architecture), and this constructs them.
#pragma once
#include <cstdint>
#include <memory>

#include "model/causal_lm.h"
#include "model/spec/model_config.h"

namespace xtrain::model {

// The model of config.family, its parameters declared without storage (model/layers/parameter_source.h).
std::shared_ptr<CausalLM> declare_model(const ModelConfig& config);

// The model of config.family on the CPU, every parameter drawn from `seed` by its init plan.
std::shared_ptr<CausalLM> build_model(const ModelConfig& config, uint64_t seed);

}  // namespace xtrain::model
