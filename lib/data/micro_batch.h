// MicroBatch: what one forward/backward pass reads. Unpacked, the samples are rows that each
// attend causally across their document boundaries (documents joined by EOS, as GPT-2 and
// Megatron train by default). Packed (data.pack), the samples become one row of B x seq_len
// tokens whose documents are given by cu_seqlens: positions restart and attention stays
// inside each document, and the target that would predict the next document's first token
// carries no loss, so the row's loss is that of its documents computed one by one.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include <torch/types.h>

#include "data/sample_dataset.h"

namespace xtrain::model {
struct ContextShard;
}

namespace xtrain::data {

struct MicroBatch {
  torch::Tensor inputs;      // int64 [B, seq_len], or [1, B * seq_len] when packed
  torch::Tensor targets;     // int64, the shape of inputs; kIgnoreIndex where no loss
  torch::Tensor cu_seqlens;  // packed: int64 [pieces + 1] over the row; undefined otherwise
  // Image chat: the rows' images in row order, float32 [images, channels, height, width];
  // undefined when no row has one.
  torch::Tensor pixel_values;
  int64_t target_count = 0;  // targets that carry loss
  // Encoder-decoder rows (SampleDataset::encoder_length): the first encoder_length columns are
  // the encoder's input, the rest the decoder's; 0 otherwise.
  int64_t encoder_length = 0;
  // Context parallelism: the rows are this rank's part of longer ones (train/context_split.h),
  // split as `context` says; cu_seqlens stays the whole row's. Null otherwise.
  std::shared_ptr<const model::ContextShard> context;
  std::vector<double> context_costs;  // the causal attention work of each cp rank's part
  // Multi-token prediction under context parallelism: depth k's inputs and targets (the rows'
  // tokens and targets k further ahead, shifted over the whole rows before the split, so that a
  // chunk's last positions see the next chunk's tokens), this rank's part; the whole micro
  // batch's target count and each depth's, by which the depths' losses divide. Empty (0)
  // otherwise: the model and the loss shift the rows they have.
  std::vector<torch::Tensor> inputs_ahead{}, targets_ahead{};  // (brace-built batches may leave them out)
  int64_t whole_target_count = 0;
  std::vector<int64_t> whole_ahead_counts{};
  // int64 [rows]: each row's sample index in the dataset (a packed row's samples in order), which
  // keys the dropout masks (train/dropout_key.h); undefined where the batch was not made of samples.
  torch::Tensor sample_ids{};  // (initialised: brace-built batches may leave it out)
};

// The micro batch of these global sample indices.
MicroBatch make_micro_batch(const SampleDataset& dataset, const std::vector<int64_t>& samples, bool pack);

// The lengths of the document pieces of sample g's seq_len inputs (they sum to seq_len).
std::vector<int64_t> document_piece_lengths(const SampleDataset& dataset, int64_t global_index);

// The attention cost proxy of sample g: the sum of its document pieces' squared lengths when
// packed (causal attention within each piece), seq_len^2 when not, plus its images' share
// (SampleDataset::vision_cost), so that packing and balancing count vision tokens too.
double attention_cost(const SampleDataset& dataset, int64_t global_index, bool pack);

}  // namespace xtrain::data
