// The spec of gpt_oss (transformers' GptOssForCausalLM): the Llama decoder with biases on every
// attention projection, a learned sink logit per head (self_attn.sinks), sliding-window and
// full layers as layer_types says, YaRN, and in every layer a mixture of experts with a biased
// router and GPT-OSS's biased, clamped experts (model/layers/moe.h, MoeOptions::gpt_oss_experts).
// Tensor names and layouts are transformers' (mlp.router.*, mlp.experts.gate_up_proj [E, H, 2I]).
#pragma once
#include "model/spec/model_spec.h"

namespace xtrain::model {

ModelSpec gpt_oss_spec();

}  // namespace xtrain::model
