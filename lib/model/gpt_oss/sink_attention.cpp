#include "model/gpt_oss/sink_attention.h"

#include "model/layers/parameter_source.h"

namespace xtrain::model {

SinkAttentionImpl::SinkAttentionImpl(const ModelConfig& config, const AttentionFeatures& features, int64_t layer)
    : AttentionImpl(config, features, layer) {
  sinks = register_parameter("sinks", unmaterialized({config.num_heads}));
}

void SinkAttentionImpl::describe_init(const std::string& name, double std, double output_std, InitPlan& plan) const {
  AttentionImpl::describe_init(name, std, output_std, plan);
  plan[name + ".sinks"] = {ParameterInit::Kind::zeros, 0.0};
}

TensorParallelPlan SinkAttentionImpl::tensor_parallel_plan(int64_t rank, int64_t ranks) const {
  auto plan = AttentionImpl::tensor_parallel_plan(rank, ranks);
  plan["sinks"] = {0, split_share(sinks.size(0), rank, ranks)};
  return plan;
}

// Under tensor parallelism, this rank's heads' sinks (the plan splits them).
AttentionVariant SinkAttentionImpl::variant() const {
  auto variant = AttentionImpl::variant();
  variant.sinks = sinks;
  return variant;
}

}  // namespace xtrain::model
