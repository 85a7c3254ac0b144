// Evaluation: mean next-token loss and perplexity over a dataset, in its natural order.
#pragma once
#include <string>
#include <vector>

#include "data/micro_batch.h"

#include "data/sample_dataset.h"
#include "model/causal_lm.h"

namespace xtrain::train {

struct EvalResult {
  double loss = 0;
  double perplexity = 0;
  int64_t tokens = 0;
};

// Scores the first max_batches micro batches (0: the whole dataset, each sample once): the
// mean loss over the dataset's targets (with a loss mask, only the tokens that carry loss).
// pack: score each document apart, as training with data.pack does (data/micro_batch.h).
EvalResult evaluate(model::CausalLM& model, const data::SampleDataset& dataset,
                    int64_t micro_batch_size, int64_t max_batches, const std::string& dtype,
                    int64_t loss_chunk_tokens = 0, bool pack = false);

// The micro batches that evaluate() scores, all at once, for a caller that runs them itself (a
// pipeline's schedule).
std::vector<data::MicroBatch> eval_micro_batches(const data::SampleDataset& dataset, int64_t micro_batch_size,
                                                 int64_t max_batches, bool pack);

}  // namespace xtrain::train
