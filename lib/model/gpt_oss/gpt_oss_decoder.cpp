#include "model/gpt_oss/gpt_oss_decoder.h"

#include "model/attention/attention.h"

namespace xtrain::model {

DecoderParts gpt_oss_decoder_parts(const AttentionFeatures& features) {
  DecoderParts parts;
  parts.attention = [features](const ModelConfig& config, int64_t layer) -> std::shared_ptr<AttentionLayer> {
    return Attention(config, features, layer).ptr();
  };
  parts.experts = [features](const ModelConfig& config) {
    auto options = moe_options(config);
    options.gpt_oss_experts = features.gpt_oss_experts;
    return MoeBlock(options);
  };
  return parts;
}

}  // namespace xtrain::model
