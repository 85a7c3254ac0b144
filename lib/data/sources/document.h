// Document: one unit of training data before tokenization: a plain text, or a conversation
// (a chat JSONL record) that a chat template renders, with the images its "<image>" placeholders
// stand for (image-chat data of vision-language models).
#pragma once
#include <string>
#include <vector>

#include "text/chat_template.h"

namespace xtrain::data {

struct Document {
  std::string text;                   // a plain text document
  std::vector<text::ChatMessage> messages;  // a conversation, when is_conversation
  bool is_conversation = false;
  std::vector<std::string> images;   // a conversation's image paths, as the record wrote them
};

}  // namespace xtrain::data
