#include "model/deepseek/deepseek_decoder.h"

#include "model/deepseek/latent_attention.h"

namespace xtrain::model {

DecoderParts deepseek_decoder_parts(const AttentionFeatures&) {
  DecoderParts parts;
  parts.attention = [](const ModelConfig& config, int64_t) -> std::shared_ptr<AttentionLayer> {
    return LatentAttention(config).ptr();
  };
  parts.experts = [](const ModelConfig& config) { return MoeBlock(moe_options(config)); };
  return parts;
}

}  // namespace xtrain::model
