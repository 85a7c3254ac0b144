// MaskedLmDataset: the masked-language-model objective (data.objective mlm) over any sample
// dataset. Sample g is [CLS] followed by the first seq_len - 1 tokens of the underlying window g,
// whose documents are joined by [SEP] (the tokenizer's end of document): full sequences of text,
// as BERT and RoBERTa pretrain. Of the tokens that are not special, each is chosen with
// probability mlm_probability; a chosen token becomes [MASK] 80% of the time, a uniformly random
// token 10%, and stays unchanged 10% (transformers' DataCollatorForLanguageModeling), and only
// chosen tokens carry a target: their original id. The choice is a pure function of (seed, g),
// so every layout and every resume sees the same masks.
//
// Packed (data.pack), each document is its own piece: it begins after the previous one's [SEP].
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "data/sample_dataset.h"

namespace xtrain::data {

struct MaskedLmOptions {
  double probability = 0.15;
  int64_t cls_id = 0, mask_id = 0;
  std::vector<int64_t> special_ids;  // never chosen: [CLS], [SEP], [PAD], [MASK], [UNK], ...
  int64_t vocab_size = 0;            // random replacements are drawn from [0, vocab_size)
  uint64_t seed = 0;
};

class MaskedLmDataset final : public SampleDataset {
 public:
  MaskedLmDataset(std::unique_ptr<SampleDataset> base, MaskedLmOptions options);

  int64_t num_samples() const override { return base_->num_samples(); }
  int64_t num_tokens() const override { return base_->num_tokens(); }
  int64_t seq_len() const override { return base_->seq_len(); }
  // Inputs are [:, :-1] as for every dataset: the masked sequence; the last column is [CLS].
  torch::Tensor batch(int64_t first_global_index, int64_t count) const override;
  torch::Tensor targets(int64_t first_global_index, int64_t count) const override;
  bool has_loss_mask() const override { return true; }
  std::vector<int64_t> document_starts(int64_t global_index) const override;
  double unigram_entropy() const override { return base_->unigram_entropy(); }

 private:
  struct Masked {
    std::vector<int64_t> inputs, targets;  // seq_len each
  };
  Masked masked(int64_t global_index) const;

  std::unique_ptr<SampleDataset> base_;
  MaskedLmOptions options_;
};

}  // namespace xtrain::data
