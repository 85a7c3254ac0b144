#include "model/gpt_oss/gpt_oss_decoder.h"

#include "model/gpt_oss/clamped_experts.h"
#include "model/gpt_oss/sink_attention.h"

namespace xtrain::model {

DecoderParts gpt_oss_decoder_parts(const AttentionFeatures& features) {
  DecoderParts parts;
  parts.attention = [features](const ModelConfig& config, int64_t layer) -> std::shared_ptr<AttentionLayer> {
    return SinkAttention(config, features, layer).ptr();
  };
  parts.experts = [](const ModelConfig& config) {
    const std::shared_ptr<MoeBlockImpl> experts =
        std::make_shared<ClampedExpertsImpl>(moe_options(config), config.swiglu_limit, config.swiglu_alpha);
    return MoeBlock(experts);
  };
  return parts;
}

}  // namespace xtrain::model
