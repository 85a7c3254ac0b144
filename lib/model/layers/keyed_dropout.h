// Keyed dropout: inverted dropout (kept elements scaled by 1 / (1 - p), as torch's) whose
// keep-or-drop decision for an element is a pure function of the run's seed, the step, the
// layer, the site in the layer, the token's identity in the run's data (its sample's index in
// the dataset and its position in that sample) and the element's global feature (or head and
// key token) index. No generator state: any split of the batch, the features or the layers
// over ranks draws the very masks one process draws, a recomputed block (activation
// checkpointing) draws its forward's masks again, and a resumed run needs nothing saved.
//
// The hash is a 32-bit multiply-xorshift mixer computed with int64 ATen ops on values below
// 2^32 (products stay below 2^63: no overflow, and >> on non-negative values is logical), so
// CPU and CUDA compute the same bits. An element is kept when its hash >= p * 2^32.
#pragma once
#include <cstdint>
#include <string_view>

#include <torch/types.h>

namespace xtrain::model {

// What a training step's batch brings for its dropout; undefined tokens: no dropout (eval,
// generate, a model run outside training).
struct DropoutKey {
  uint64_t seed = 0;     // run.seed
  int64_t step = 0;      // the optimizer step
  torch::Tensor tokens;  // int64 [B, T]: sample index * seq_len + position in the sample, per token
  bool defined() const { return tokens.defined(); }
  // The key of rows of `positions` tokens each whose row r is the sample of tokens[r][0] (a model
  // whose rows hold more tokens than its inputs: ViT's patches behind one placeholder input).
  DropoutKey rows_of(int64_t positions) const;
};

// Where in a layer the mask applies; a mask differs by site.
enum class DropoutSite : int64_t { embeddings = 0, attention_probs = 1, attention_output = 2, mlp_output = 3 };

// The site of the input of a LoRA adapter on the layer's linear layer named `module` (q_proj, ...):
// 2^32 + the 32-bit FNV-1a hash of the name, apart from the sites above and from each other.
DropoutSite adapter_site(std::string_view module);

// The keep mask (bool [B, T, features]) of hidden states whose feature f is global feature
// feature_offset + f (a tensor-parallel rank's slice).
torch::Tensor hidden_keep_mask(const DropoutKey& key, int64_t layer, DropoutSite site, int64_t features,
                               int64_t feature_offset, double p);
// The keep mask (bool [B, heads, T, T]) of attention probabilities of self-attention over
// key.tokens, local head h being global head head_offset + h.
torch::Tensor attention_keep_mask(const DropoutKey& key, int64_t layer, int64_t heads, int64_t head_offset, double p);
// The keep mask (bool [B, heads, T, S]) of attention probabilities whose queries are `queries`'
// T tokens and whose keys are `keys`' S tokens (cross-attention: the decoder's rows, the
// encoder's columns), hashed over [T, S] alone; seed and step are the queries'. Element (t, s)
// is what the self-attention mask of both side by side holds at row t, column T + s.
torch::Tensor attention_keep_mask(const DropoutKey& queries, const DropoutKey& keys, int64_t layer, int64_t heads,
                                  int64_t head_offset, double p);

// x [B, T, F] with dropout p (identity when p is 0 or the key is undefined).
torch::Tensor hidden_dropout(const torch::Tensor& x, double p, const DropoutKey& key, int64_t layer, DropoutSite site,
                             int64_t feature_offset = 0);
// Attention probabilities [B, heads, T, T] with dropout p (identity when p is 0 or no key).
torch::Tensor attention_dropout(const torch::Tensor& probs, double p, const DropoutKey& key, int64_t layer,
                                int64_t head_offset = 0);

}  // namespace xtrain::model
