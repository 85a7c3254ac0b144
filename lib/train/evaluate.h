// Evaluation: mean loss, perplexity and top-1 accuracy over a dataset's targets, in its
// natural order.
#pragma once
#include <limits>
#include <string>
#include <vector>

#include "config/recipe_choices.h"
#include "data/micro_batch.h"

#include "data/sample_dataset.h"
#include "model/causal_lm.h"

namespace xtrain::train {

struct EvalResult {
  double loss = 0;
  double perplexity = 0;
  int64_t tokens = 0;
  // Share of the targets that are the model's top-1 prediction (masked-token accuracy for a
  // masked LM); NaN where not measured (tensor or pipeline parallel).
  double accuracy = std::numeric_limits<double>::quiet_NaN();
};

// Scores the first max_batches micro batches (0: the whole dataset, each sample once): the
// mean loss over the dataset's targets (with a loss mask, only the tokens that carry loss).
// pack: score each document apart, as training with data.pack does (data/micro_batch.h).
EvalResult evaluate(model::CausalLM& model, const data::SampleDataset& dataset,
                    int64_t micro_batch_size, int64_t max_batches, config::Dtype dtype,
                    int64_t loss_chunk_tokens = 0, bool pack = false);

// One micro batch scored: its loss summed over its targets and, unless the model is tensor
// parallel (a rank lacks the whole vocabulary's logits), how many targets are the top-1
// prediction (else undefined); float64 on the model's device.
struct MicroBatchScore {
  torch::Tensor loss_sum, correct;
};
MicroBatchScore score_micro_batch(model::CausalLM& model, const data::MicroBatch& batch, config::Dtype dtype,
                                  int64_t loss_chunk_tokens);

// " | accuracy 0.123" when measured, else empty: the eval lines' accuracy field.
std::string accuracy_text(const EvalResult& result);

// The micro batches that evaluate() scores, all at once, for a caller that runs them itself (a
// pipeline's schedule).
std::vector<data::MicroBatch> eval_micro_batches(const data::SampleDataset& dataset, int64_t micro_batch_size,
                                                 int64_t max_batches, bool pack);

}  // namespace xtrain::train
