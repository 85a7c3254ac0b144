// GPT-OSS's attention: grouped-query attention (model/attention/attention.h) with a learned sink
// logit per query head, self_attn.sinks [heads]: one more softmax column per row whose value is
// zero, so that it only takes probability away from the keys (AttentionVariant::sinks, which
// every kernel takes). Init 0; under tensor parallelism each rank holds its query heads' sinks.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include <torch/nn/pimpl.h>

#include "model/attention/attention.h"

namespace xtrain::model {

class SinkAttentionImpl : public AttentionImpl {
 public:
  SinkAttentionImpl(const ModelConfig& config, const AttentionFeatures& features, int64_t layer = 0);
  void describe_init(const std::string& name, double std, double output_std, InitPlan& plan) const override;
  TensorParallelPlan tensor_parallel_plan(int64_t rank, int64_t ranks) const override;

  torch::Tensor sinks;  // [heads] sink logits

 protected:
  AttentionVariant variant() const override;
};
TORCH_MODULE(SinkAttention);

}  // namespace xtrain::model
