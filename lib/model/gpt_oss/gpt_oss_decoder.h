// GPT-OSS's decoder parts: grouped-query attention with biases and a learned sink logit per head
// (model/attention/attention.h's AttentionVariant::sinks), and experts with GPT-OSS's biased
// router and clamped SwiGLU (model/gpt_oss/clamped_experts.h).
#pragma once
#include "model/decoder_layer.h"

namespace xtrain::model {

DecoderParts gpt_oss_decoder_parts(const AttentionFeatures& features);

}  // namespace xtrain::model
