// Evaluation: mean next-token loss and perplexity over a dataset, in its natural order.
#pragma once
#include <string>

#include "data/token_dataset.h"
#include "model/llama.h"

namespace xtrain::train {

struct EvalResult {
  double loss = 0;
  double perplexity = 0;
  int64_t tokens = 0;
};

// Scores the first max_batches micro batches (0: the whole dataset, each sample once).
EvalResult evaluate(model::LlamaForCausalLM& model, const data::TokenDataset& dataset,
                    int64_t micro_batch_size, int64_t max_batches, const std::string& dtype,
                    int64_t loss_chunk_tokens = 0);

}  // namespace xtrain::train
