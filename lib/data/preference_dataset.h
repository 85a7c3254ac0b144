// PreferenceDataset: preference pairs for data.objective dpo, read from a JSONL file of records
// {"prompt": "...", "chosen": "...", "rejected": "..."} (TRL's plain preference format), or the
// same with lists of {"role", "content"} messages (TRL's conversational format). Each pair is
// two rows, sample 2i its chosen completion and 2i + 1 its rejected one: the prompt's tokens,
// then the completion's (and EOS after a plain one), right-padded with EOS to seq_len + 1 tokens. Only the
// completion's tokens (its EOS included) are targets, as TRL masks the prompt; a completion
// longer than the row is cut at its end (TRL's keep_start). The pairs are shuffled whole, so a
// micro batch of an even number of rows starting at an even index holds whole pairs.
// Problems (a record without "chosen", an empty completion, a prompt that leaves no room for a
// completion in data.seq_len) are InputErrors naming the file and line.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/epoch_order.h"
#include "data/sample_dataset.h"
#include "text/tokenizer.h"

namespace xtrain::data {

struct PreferencePair {
  std::vector<int64_t> prompt, chosen, rejected;  // token ids; the completions end with EOS
};

// The pairs of a preference JSONL file, tokenized; nothing is cut yet. Conversational records
// are written with chat_template (data.chat_template's spec, text/chat_template.h).
std::vector<PreferencePair> read_preference_pairs(const std::string& path, const text::Tokenizer& tokenizer,
                                                  int64_t seq_len, const std::string& chat_template = "chatml");

class PreferenceDataset final : public SampleDataset {
 public:
  PreferenceDataset(std::vector<PreferencePair> pairs, int64_t seq_len, int64_t pad_id, uint64_t seed, bool shuffle);

  int64_t num_samples() const override { return 2 * static_cast<int64_t>(pairs_.size()); }
  int64_t num_tokens() const override { return tokens_; }
  int64_t seq_len() const override { return seq_len_; }
  torch::Tensor batch(int64_t first_global_index, int64_t count) const override;
  torch::Tensor targets(int64_t first_global_index, int64_t count) const override;
  bool has_loss_mask() const override { return true; }
  std::vector<int64_t> document_starts(int64_t) const override { return {}; }
  double unigram_entropy() const override { return 0; }
  bool preference_pairs() const override { return true; }

 private:
  struct Row {
    std::vector<int64_t> tokens;  // seq_len + 1, padded
    int64_t prompt = 0;           // the prompt's tokens, before the completion's
    int64_t end = 0;              // one past the completion's last token in the row
  };
  Row row(int64_t global_index) const;

  std::vector<PreferencePair> pairs_;
  int64_t seq_len_;
  int64_t pad_id_;
  EpochOrder order_;
  int64_t tokens_ = 0;
};

}  // namespace xtrain::data
