// What a family's decoder layers add to Llama's: a fact of the family, held by its ModelSpec.
#pragma once

namespace xtrain::model {

struct AttentionFeatures {
  bool qkv_bias = false;  // biases on the q, k and v projections (qwen2, gpt_oss)
  bool qk_norm = false;   // RMSNorm over each head of q and k before the rotation (qwen3)
  bool o_bias = false;    // a bias on the output projection (gpt_oss)
  bool sinks = false;     // a learned per-head sink logit in the softmax, self_attn.sinks (gpt_oss)
  // GPT-OSS's experts (model/layers/moe.h, MoeOptions::gpt_oss_experts) and the router's bias.
  bool gpt_oss_experts = false;
};

}  // namespace xtrain::model
