// What a micro batch's activations and logits take on one rank, in bytes, as the engine keeps
// them: the element size of the compute dtype, a layer's set saved for backward, the block inputs
// that every recompute setting keeps, and the loss's logits. The engine's start-up memory bound
// (train/micro_batch_memory.h) and the planner (plan/memory_estimate.h) both count with these.
// No LibTorch, no recipe: shapes and splits come in as plain numbers.
#pragma once
#include <cstdint>

namespace xtrain::layout {

// Bytes of one activation or logit element: 4 when the compute dtype is fp32, 2 under mixed
// precision (bf16, fp16).
int64_t activation_bytes(bool fp32_compute);

// How a layer's activations split over a rank's groups.
struct ActivationSplit {
  int64_t tp = 1;                  // heads and the MLP's width; the residual stream too under sequence parallelism
  bool sequence_parallel = false;  // the residual stream's tokens over the tp ranks
  int64_t cp = 1;                  // the tokens over the context-parallel ranks
};

// One token's widths in a layer.
struct LayerWidths {
  int64_t hidden = 0;
  int64_t query_width = 0, key_width = 0, value_width = 0;  // q, k (latent attention: the latents), v
  int64_t intermediate = 0;                                  // a dense MLP's
  bool routed = false;                                       // a layer of routed experts, not a dense MLP
  int64_t experts = 0, top_k = 0, moe_intermediate = 0, shared_experts = 0;
};

// Bytes one token leaves in a layer for backward on a rank, without recompute: the whole set,
// and its MLP's (or experts') intermediates, whose gradients a rerun layer's backward forms while
// the set is still held. Routed experts count their busiest expert's rows (1.25 x the mean).
struct LayerActivations {
  double set = 0, mlp = 0;
};
LayerActivations layer_activation_bytes(const LayerWidths& widths, const ActivationSplit& split, double element);

// Bytes of one token's block input (the residual stream) on a rank: what a recomputed layer keeps.
double block_input_bytes(int64_t hidden, const ActivationSplit& split, double element);

// The block inputs `layers` layers keep for backward for `tokens` tokens of a sequence, split by
// cp and (under sequence parallelism) tp: the least a micro batch holds under any recompute.
int64_t kept_block_inputs_bytes(int64_t tokens, int64_t hidden, int64_t layers, const ActivationSplit& split,
                                int64_t element);

// The fp32 logits of `rows` tokens over a vocabulary split by tp: the least an unchunked loss holds.
int64_t fp32_logits_bytes(int64_t rows, int64_t vocab, int64_t tp);

// The loss's memory beside the head's gradient for `tokens` tokens on a rank, vocabulary split by
// tp. Chunked (chunk_tokens > 0): one fp32 [chunk, vocab / tp] buffer, the logits that become their
// gradient in place, its copy in the compute dtype (bf16, fp16) for the gradient GEMMs, and the
// gradient of the loss's input. Unchunked (0): the log-softmax's
// backward, which holds three fp32 copies of the logits (its output, the gradient it takes and the
// one it gives).
double loss_bytes(double tokens, double chunk_tokens, int64_t vocab, int64_t hidden, int64_t tp, double element);

}  // namespace xtrain::layout
