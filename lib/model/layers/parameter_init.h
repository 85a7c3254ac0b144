// Seeded initialisation, per parameter: the values of a parameter depend on run.seed, its name
// and the element's index only, never on which rank draws them or in what order. Every layout
// therefore starts from the same weights, and a rank can draw just its shard: the flattened
// parameter is cut into blocks of kInitBlock elements, each drawn from a generator seeded by
// (seed, name, block).
//
// How each parameter is drawn comes from the model's module tree (CausalLM::init_plan), each
// layer describing its own.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include <torch/types.h>

#include "model/layers/parameter_source.h"

namespace xtrain::model {

struct ParameterInit {
  enum class Kind { normal, zeros, ones, constant };
  Kind kind = Kind::normal;
  double std = 0;    // of normal
  double value = 0;  // of constant (clip's logit_scale)
};

using InitPlan = std::map<std::string, ParameterInit>;  // by full parameter name

inline constexpr int64_t kInitBlock = int64_t{1} << 16;

// Elements [begin, begin + count) of parameter `name`'s flattening under `init`, fp32 on the CPU.
torch::Tensor initial_values(const ParameterInit& init, uint64_t seed, const std::string& name, int64_t begin,
                             int64_t count);
// The source of a plan's initial values; a name outside the plan is a logic error.
ParameterSource init_source(InitPlan plan, uint64_t seed);

}  // namespace xtrain::model
