// The spec of deepseek_v3 (transformers' DeepseekV3ForCausalLM): the Llama decoder with
// multi-head latent attention (model/deepseek/latent_attention.h), first_k_dense dense layers and then
// mixture-of-experts layers routed by sigmoid scores with the expert bias (model.router
// sigmoid_bias, group-limited, scaled) and shared experts. Tensor names are transformers'; the
// experts are stored apart as in DeepSeek's checkpoints (mlp.experts.N.gate_proj.weight, ...),
// and each MoE layer's expert bias as mlp.gate.e_score_correction_bias.
#pragma once
#include "model/spec/model_spec.h"

namespace xtrain::model {

ModelSpec deepseek_v3_spec();

}  // namespace xtrain::model
