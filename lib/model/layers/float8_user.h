// A module with layers that compute in FP8 under precision.fp8 (model::apply_float8), or with
// parts that have them. Each hands over its own linear layers and expert blocks under their full
// module names, a composite passing a prefixed name to the parts it knows by type, so that FP8
// is installed without walking the module tree and casting. What stays in high precision is
// left out where it is built: the output head, the router and the shared experts' gate (as
// torchao and DeepSeek-V3 keep them). LoRA adapts layers of the same listing (model/layers/lora.h).
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace xtrain::model {

class LinearImpl;
class MoeBlockImpl;

struct Float8Layers {
  std::vector<std::pair<std::string, LinearImpl*>> linears;    // by module name ("model.layers.0.mlp.up_proj")
  std::vector<std::pair<std::string, MoeBlockImpl*>> experts;  // by the block's module name
};

// Joins a module name and a part's: "" and "model" give "model".
inline std::string module_name(const std::string& prefix, const std::string& part) {
  return prefix.empty() ? part : prefix + "." + part;
}

class Float8User {
 public:
  virtual ~Float8User() = default;
  // Adds this module's FP8 layers to `layers`, `name` being the module's full name ("" at the root).
  virtual void float8_layers(const std::string& name, Float8Layers& layers) = 0;
};

}  // namespace xtrain::model
