// Batched sampling with a key/value cache, for GRPO's rollouts: one completion per prompt row.
// Rows of different lengths are left-padded, and the cache (model/attention/kv_cache.h) gives
// each row its own positions and hides the padding, so a row's completion does not depend on the
// others (up to the rounding of batched matrix products). Each step samples every unfinished row
// from the last logits: greedy at temperature 0, else temperature, then top-k, then top-p
// (transformers' order), drawn from the row's own generator, keyed by the seed and the row's
// index in `prompts`, so a seed reproduces a row whatever the rest of the batch holds. A row
// ends after a stop id (kept) or at max_new_tokens; finished rows leave the batch.
//
// The model runs in eval mode and without gradients, and is put back in its former mode. Only
// the families whose CausalLM::reads_kv_cache() (llama, qwen2, qwen3, their MoE variants) are
// taken; others, tensor parallelism and rows longer than model.max_seq_len are refused.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "model/causal_lm.h"

namespace xtrain::train {

struct SamplingOptions {
  int64_t max_new_tokens = 64;
  double temperature = 1.0;  // 0: greedy
  double top_p = 1.0;        // nucleus; 1: off
  int64_t top_k = 0;         // 0: off
  std::vector<int64_t> stop_ids;  // a completion ends after emitting one of these (kept in the completion)
  uint64_t seed = 0;
  // Row r draws from row_generator(seed, first_row + r): a caller sampling a slice of a larger
  // batch (one rank's share) keys its rows by their place in the whole batch.
  int64_t first_row = 0;
  // Called with the logits [vocab] (fp32) each row's token was drawn from, before the draw, by
  // row index and step; for checks and log-probabilities. Empty: none.
  std::function<void(int64_t row, int64_t step, const torch::Tensor& logits)> on_logits;
};

struct Rollouts {
  std::vector<std::vector<int64_t>> completions;  // per prompt-row, generated ids without the prompt
  std::vector<bool> stopped;                      // ended on a stop id (else on max_new_tokens)
  int64_t generated_tokens = 0;
  double seconds = 0;
  int64_t forwards = 0;  // model forwards run (the prompt's one included)
};

// Samples one completion per row of `prompts` (rows of different lengths: left-padded internally,
// with the attention mask and positions that make each row's result independent of the others).
// `all_finished`, when set, is called once per decode step with whether this rank's rows are all
// done, and returns whether every rank's are (ranks under FSDP must run the same number of
// forwards, since each forward gathers parameters); default: local only.
Rollouts sample_rollouts(model::CausalLM& model, const std::vector<std::vector<int64_t>>& prompts,
                         const SamplingOptions& options, const std::function<bool(bool)>& all_finished = {});

// The generator of row `row` under `seed` (a mix of both, so neighbouring rows and seeds draw
// unrelated streams).
at::Generator row_generator(uint64_t seed, int64_t row);

// The token drawn from fp32 logits [vocab] under the options' temperature, top-k and top-p.
int64_t sample_token(const torch::Tensor& logits, const SamplingOptions& options, at::Generator& generator);

}  // namespace xtrain::train
