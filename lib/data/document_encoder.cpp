#include "data/document_encoder.h"

#include <utility>

namespace xtrain::data {

DocumentEncoder::DocumentEncoder(const Tokenizer& tokenizer, ChatTemplate chat_template)
    : tokenizer_(tokenizer), chat_template_(std::move(chat_template)) {}

EncodedDocument DocumentEncoder::encode(const Document& document) const {
  EncodedDocument encoded;
  if (!document.is_conversation) {
    encoded.tokens = tokenizer_.encode(document.text);
    encoded.tokens.push_back(tokenizer_.eos_id());
    return encoded;
  }
  for (const auto& segment : chat_template_.render(document.messages)) {
    const std::vector<int64_t> ids = tokenizer_.encode(segment.text);
    encoded.tokens.insert(encoded.tokens.end(), ids.begin(), ids.end());
    encoded.loss_mask.insert(encoded.loss_mask.end(), ids.size(), segment.loss ? 1 : 0);
  }
  encoded.tokens.push_back(tokenizer_.eos_id());
  encoded.loss_mask.push_back(0);
  return encoded;
}

}  // namespace xtrain::data
