#include "model/layers/lora.h"

#include <algorithm>
#include <set>
#include <stdexcept>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "model/layers/linear.h"

namespace xtrain::model {

int64_t add_lora_adapters(torch::nn::Module& model, const LoraConfig& lora) {
  // Collected first: adding the adapters adds modules to the tree being walked.
  std::vector<LinearImpl*> adapted;
  std::set<std::string> matched;
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    auto* linear = dynamic_cast<LinearImpl*>(item.value().get());
    if (!linear) continue;
    const std::string& name = item.key();
    const auto dot = name.rfind('.');
    const std::string last = dot == std::string::npos ? name : name.substr(dot + 1);
    if (std::find(lora.targets.begin(), lora.targets.end(), last) == lora.targets.end()) continue;
    adapted.push_back(linear);
    matched.insert(last);
  }
  for (const auto& target : lora.targets)
    if (matched.count(target) == 0)
      throw std::invalid_argument(fmt::format("model.lora.targets: '{}' names no linear layer of the model", target));
  for (auto* linear : adapted) linear->add_adapter(lora.rank, lora.scale());
  return static_cast<int64_t>(adapted.size());
}

}  // namespace xtrain::model
