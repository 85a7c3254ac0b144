#include "model/layers/lora.h"

#include <algorithm>
#include <set>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "model/layers/linear.h"

namespace xtrain::model {

namespace {

// The decoder layer of a module named "...layers.N.<...>": N.
int64_t decoder_layer_of(const std::string& name) {
  const auto at = name.rfind("layers.");
  if (at == std::string::npos) throw std::invalid_argument(fmt::format("'{}' is in no decoder layer", name));
  return std::stoll(name.substr(at + 7));
}

}  // namespace

int64_t add_lora_adapters(Float8User& model, const LoraConfig& lora, std::shared_ptr<const DropoutKey> key) {
  // The family's own listing of its linear layers: collected first, as adding the adapters adds
  // modules to the model.
  Float8Layers layers;
  model.float8_layers("", layers);
  std::vector<std::tuple<std::string, std::string, LinearImpl*>> adapted;  // name, module, layer
  std::set<std::string> matched;
  for (const auto& [name, linear] : layers.linears) {
    const auto dot = name.rfind('.');
    const std::string last = dot == std::string::npos ? name : name.substr(dot + 1);
    if (std::find(lora.targets.begin(), lora.targets.end(), last) == lora.targets.end()) continue;
    adapted.emplace_back(name, last, linear);
    matched.insert(last);
  }
  for (const auto& target : lora.targets)
    if (matched.count(target) == 0)
      throw std::invalid_argument(fmt::format("model.lora.targets: '{}' names no linear layer of the model", target));
  for (const auto& [name, module, linear] : adapted) {
    AdapterDropout dropout;
    if (lora.dropout > 0) dropout = {lora.dropout, decoder_layer_of(name), adapter_site(module), key};
    linear->add_adapter(lora.rank, lora.scale(), std::move(dropout));
  }
  return static_cast<int64_t>(adapted.size());
}

}  // namespace xtrain::model
