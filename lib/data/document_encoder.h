// DocumentEncoder: the one place where documents become token ids. Every document is followed
// by the tokenizer's EOS id. A plain text is encode(text) and every token is a loss target. A
// conversation is rendered by the chat template into segments, each encoded on its own (so a
// loss boundary never falls inside a token); its targets are the tokens of the segments marked
// for loss (the assistant's turns), not the EOS that separates it from the next document.
// Safe to call from several threads.
#pragma once
#include <cstdint>
#include <vector>

#include "data/chat_template.h"
#include "data/document.h"
#include "data/tokenizer.h"

namespace xtrain::data {

struct EncodedDocument {
  std::vector<int64_t> tokens;
  // 1 where the token is a target of the next-token loss; empty means every token is.
  std::vector<uint8_t> loss_mask;
};

class DocumentEncoder {
 public:
  DocumentEncoder(const Tokenizer& tokenizer, ChatTemplate chat_template);

  // An unknown role is an InputError (without a place: the caller knows the file and line).
  EncodedDocument encode(const Document& document) const;

 private:
  const Tokenizer& tokenizer_;
  ChatTemplate chat_template_;
};

}  // namespace xtrain::data
