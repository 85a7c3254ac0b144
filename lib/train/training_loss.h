// The training loss of a batch: cross-entropy of the model's logits against the batch's labels,
// through the chunked output projection + loss when a chunk size is set, so the
// [tokens x vocab] logits never exist; and the model's auxiliary losses beside it.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "config/recipe.h"
#include "data/micro_batch.h"
#include "memory/chunked_loss.h"
#include "model/causal_lm.h"

namespace xtrain::train {

// Tokens per loss chunk for memory.chunked_loss (0: unchunked), by layout::loss_chunk_tokens.
int64_t loss_chunk_tokens(const config::Recipe& recipe);

struct BatchLoss {
  torch::Tensor loss;  // mean over the labels that are not -100; 0 when there are none
  std::vector<std::pair<std::string, torch::Tensor>> aux_losses;  // the model's, by name
  torch::Tensor expert_load, dropped;  // the model's (model/model_output.h)
  // Multi-token prediction: mtp_loss_weight x the mean of the depths' losses, to differentiate
  // beside `loss` with the weight of the whole micro batch's targets (under context parallelism
  // each rank holds its part of the depths' means: model::Batch::labels_ahead_counts); undefined
  // without it.
  torch::Tensor mtp_loss;
  // mtp_K: depth K's mean cross-entropy over its own targets, or this rank's part of it, as above
  // (detached, before mtp_loss_weight).
  std::vector<std::pair<std::string, torch::Tensor>> depth_losses{};  // (brace-built losses may leave it out)
};

// Depth k's loss's name among the auxiliary losses: mtp_K.
std::string depth_loss_name(int64_t k);

// Depth k's targets of multi-token prediction: position i's is labels[i + k], -100 past the end
// and where the token k ahead lies in another packed document (cu_seqlens, host int64, or
// undefined for one sequence per row).
torch::Tensor labels_ahead(const torch::Tensor& labels, int64_t k, const torch::Tensor& cu_seqlens);

// batch.labels: [B, T], -100 where a token carries no loss (as a SampleDataset's targets()).
// Differentiate with backward(): the output weight's gradient goes straight into its .grad when
// that exists (memory::WeightGrad; into_fresh_grad only where the caller guarantees its terms).
BatchLoss training_loss(model::CausalLM& model, const model::Batch& batch, int64_t chunk_tokens,
                        memory::WeightGrad output_weight_grad = memory::WeightGrad::into_existing_grad);
// The same losses of the model's output for the batch (forward's, or a pipeline's head chunk's).
BatchLoss output_loss(model::CausalLM& model, const model::Batch& batch, model::ModelOutput output,
                      int64_t chunk_tokens,
                      memory::WeightGrad output_weight_grad = memory::WeightGrad::into_existing_grad);
// The same loss of the model's final hidden states (ModelOutput::hidden; a pipeline's last chunk).
torch::Tensor next_token_loss_of_hidden(model::CausalLM& model, const torch::Tensor& hidden, const torch::Tensor& labels,
                                        int64_t chunk_tokens,
                                        memory::WeightGrad output_weight_grad = memory::WeightGrad::into_existing_grad);

// The model batch of a data micro batch's inputs and targets, on `device`.
model::Batch model_batch(const torch::Tensor& inputs, const torch::Tensor& targets, const torch::Tensor& cu_seqlens,
                         const torch::Device& device);
// The same with the micro batch's extra inputs (pixel_values of image chat).
model::Batch model_batch(const data::MicroBatch& batch, const torch::Device& device);

}  // namespace xtrain::train
