#include "layout/activation_memory.h"

#include <algorithm>

namespace xtrain::layout {
namespace {

constexpr double kExpertImbalance = 1.25;  // dropless routing: the busiest expert's rows over the mean

// The residual stream's width on a rank.
double stream_width(int64_t hidden, const ActivationSplit& split) {
  return split.sequence_parallel ? static_cast<double>(hidden) / static_cast<double>(split.tp)
                                 : static_cast<double>(hidden);
}

}  // namespace

int64_t activation_bytes(bool fp32_compute) { return fp32_compute ? 4 : 2; }

LayerActivations layer_activation_bytes(const LayerWidths& w, const ActivationSplit& split, double element) {
  const auto tp = static_cast<double>(split.tp);
  const double stream = stream_width(w.hidden, split);
  // Attention: the norm's input and output, q, k, v and the attention output.
  double per_token = 2 * stream + static_cast<double>(w.query_width + 2 * w.key_width + w.value_width) / tp;
  per_token += 2 * stream;  // the MLP's norm input and output
  double mlp = 0;
  if (w.routed) {
    const double rows = static_cast<double>(w.top_k) * kExpertImbalance / tp;
    mlp = rows * static_cast<double>(3 * w.moe_intermediate) +
          static_cast<double>(3 * w.moe_intermediate * w.shared_experts) / tp;
    per_token += mlp + rows * static_cast<double>(2 * w.hidden);
    per_token += static_cast<double>(w.experts) * 4 / element;  // router logits, fp32
  } else {
    mlp = 3 * static_cast<double>(w.intermediate) / tp;  // gate, up, and their product
    per_token += mlp;
  }
  return {per_token * element, mlp * element};
}

double block_input_bytes(int64_t hidden, const ActivationSplit& split, double element) {
  return element * stream_width(hidden, split);
}

int64_t kept_block_inputs_bytes(int64_t tokens, int64_t hidden, int64_t layers, const ActivationSplit& split,
                                int64_t element) {
  const int64_t sequence_split = (split.sequence_parallel ? split.tp : 1) * split.cp;
  return tokens * hidden * element * layers / sequence_split;
}

int64_t fp32_logits_bytes(int64_t rows, int64_t vocab, int64_t tp) { return rows * vocab * 4 / tp; }

double loss_bytes(double tokens, double chunk_tokens, int64_t vocab, int64_t hidden, int64_t tp, double element) {
  const double vocab_here = static_cast<double>(vocab) / static_cast<double>(tp);
  // Unchunked, the peak is the log-softmax's backward: its saved output, its incoming gradient and
  // its input's gradient, three fp32 logits (the forward holds at most the logits in `element`
  // beside their fp32 copy and the log-softmax, no more for element <= 4).
  if (chunk_tokens <= 0) return tokens * vocab_here * std::max(12.0, element + 8);
  // Chunked: the chunk's fp32 logits, which become their gradient in place, and that gradient in
  // the matmul dtype for the two gradient GEMMs (the same buffer in fp32).
  const double chunk_element = 4 + (element < 4 ? element : 0);
  return chunk_tokens * vocab_here * chunk_element + tokens * static_cast<double>(hidden) * element;
}

}  // namespace xtrain::layout
