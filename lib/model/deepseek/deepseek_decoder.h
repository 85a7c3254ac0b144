// DeepSeek-V3's decoder parts: multi-head latent attention (model/deepseek/latent_attention.h)
// and the config's experts (sigmoid router with expert bias, groups, shared experts). Its
// multi-token prediction depths are model/deepseek/multi_token_prediction.h.
#pragma once
#include "model/decoder_layer.h"

namespace xtrain::model {

DecoderParts deepseek_decoder_parts(const AttentionFeatures& features);

}  // namespace xtrain::model
