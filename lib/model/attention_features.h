// What a family's attention adds to Llama's: a fact of the family, held by its ModelSpec.
#pragma once

namespace xtrain::model {

struct AttentionFeatures {
  bool qkv_bias = false;  // biases on the q, k and v projections (qwen2)
  bool qk_norm = false;   // RMSNorm over each head of q and k before the rotation (qwen3)
};

}  // namespace xtrain::model
