// The training loss of a batch: next-token cross-entropy, through the chunked output
// projection + loss when a chunk size is set, so the [tokens x vocab] logits never exist.
#pragma once
#include <cstdint>
#include <string>

#include "config/recipe.h"
#include "model/llama.h"

namespace xtrain::train {

// Tokens per loss chunk for memory.chunked_loss (0: unchunked).
int64_t loss_chunk_tokens(const config::Recipe& recipe);

// inputs, targets: [B, T] (targets -100 where a token carries no loss, as a SampleDataset's
// targets()); layout: how each row's tokens form documents. Mean loss over the targets that are
// not -100; 0 when there are none.
torch::Tensor training_loss(model::LlamaForCausalLM& model, const torch::Tensor& inputs, const torch::Tensor& targets,
                            int64_t chunk_tokens, const model::SequenceLayout& layout = {});

}  // namespace xtrain::train
