// A bare module that only names its children: Hugging Face nests parameter names in modules
// that hold nothing of their own (vision_tower.embeddings.patch_embedding, self_attn, mlp), and
// xtrain's layers keep their parameters where those names put them.
#pragma once
#include <memory>
#include <string>

#include <torch/nn/module.h>

namespace xtrain::model {

inline std::shared_ptr<torch::nn::Module> module_scope(torch::nn::Module& parent, const std::string& name) {
  return parent.register_module(name, std::make_shared<torch::nn::Module>());
}

}  // namespace xtrain::model
