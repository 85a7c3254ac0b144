// PromptDataset: the prompts of data.objective grpo, read from a JSONL file of records
// {"prompt": "...", "answer": "..."} (TRL's plain prompt-only format with the column a
// verifiable reward compares to), or with "prompt" a list of {"role", "content"} messages (TRL's
// conversational format), written with the chat template and the assistant's prefix (a
// generation prompt, as TRL's apply_chat_template(add_generation_prompt=True)). "answer" is a
// string or a number (kept as its JSON text) and may be left out unless a reward needs it.
// Problems (invalid JSON, a missing or empty prompt, a missing answer that a reward needs, a
// prompt too long for data.seq_len less the completion's tokens) are InputErrors naming the file
// and line and the fix. The order prompts are read in is EpochOrder's: a pure function of the
// seed and the global index, so a resumed run draws the prompts the uninterrupted one would.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/epoch_order.h"
#include "text/tokenizer.h"

namespace xtrain::data {

struct PromptRecord {
  std::vector<int64_t> prompt;  // token ids of what a completion continues
  std::string prompt_text;      // that text: the prompt, or the chat template's generation prompt
  std::string prompt_json;      // the record's "prompt" as JSON (a string or the messages), for reward programs
  std::string answer;           // the record's "answer" as text; empty with has_answer false
  bool has_answer = false;
  int64_t line = 0;             // in the file, from 1
};

struct PromptReadOptions {
  int64_t seq_len = 256;         // data.seq_len: a prompt and its completion fit in it
  int64_t max_new_tokens = 64;   // grpo.max_new_tokens: the completion's room
  std::string chat_template = "chatml";
  // The reward that compares to "answer" (e.g. "grpo.rewards number_match"), named in the error
  // for a record without one; empty when no reward reads it.
  std::string answer_needed_by;
};

// The records of a prompt JSONL file, tokenized. Blank lines are skipped.
std::vector<PromptRecord> read_prompts(const std::string& path, const text::Tokenizer& tokenizer,
                                       const PromptReadOptions& options);

class PromptDataset {
 public:
  PromptDataset(std::vector<PromptRecord> records, uint64_t seed, bool shuffle);

  int64_t size() const { return static_cast<int64_t>(records_.size()); }
  // The prompt read at global_index >= 0, epoch after epoch (EpochOrder). Rollout batch k of P
  // prompts reads global indices k P ... (k + 1) P - 1.
  const PromptRecord& at(int64_t global_index) const;

 private:
  std::vector<PromptRecord> records_;
  EpochOrder order_;
};

}  // namespace xtrain::data
