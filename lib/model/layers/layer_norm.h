// LayerNorm with a gain and a bias, as encoders (BERT, the CLIP ViT) use it: y = w * (x - mean)
// / sqrt(var + eps) + b over the last dimension, the statistics in fp32 whatever the input dtype.
#pragma once
#include <cstdint>
#include <string>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "model/layers/parameter_init.h"

namespace xtrain::model {

class LayerNormImpl : public torch::nn::Module {
 public:
  LayerNormImpl(int64_t dim, double eps);
  torch::Tensor forward(const torch::Tensor& x);
  void describe_init(const std::string& name, InitPlan& plan) const;  // gains 1, biases 0

  torch::Tensor weight, bias;

 private:
  int64_t dim_;
  double eps_;
};
TORCH_MODULE(LayerNorm);

}  // namespace xtrain::model
