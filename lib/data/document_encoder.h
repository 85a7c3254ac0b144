// DocumentEncoder: the one place where documents become token ids. Every document is followed
// by the tokenizer's EOS id. A plain text is encode(text) and every token is a loss target. A
// conversation is rendered by the chat template into segments, each encoded on its own (so a
// loss boundary never falls inside a token); its targets are the tokens of the segments marked
// for loss (the assistant's turns), not the EOS that separates it from the next document.
// With an ImagePlaceholder (vision-language models), each occurrence of its text in a
// conversation becomes `tokens` copies of its id, which carry no loss; their number must equal
// the record's images. Without one, a record with images is refused: its text model would
// silently train on "<image>" as words.
// Safe to call from several threads.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/sources/document.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace xtrain::data {

struct EncodedDocument {
  std::vector<int64_t> tokens;
  // 1 where the token is a target of the next-token loss; empty means every token is.
  std::vector<uint8_t> loss_mask;
};

struct ImagePlaceholder {
  std::string text = "<image>";
  int64_t id = 0;      // the model's image token (config.json's image_token_index)
  int64_t tokens = 0;  // ids per image: the vision tower's features per image
};

// The ids of `text` with each occurrence of the placeholder's text expanded to its image tokens;
// the text around a placeholder is encoded apart, so no token spans an image. *placeholders, when
// given, receives their number; is_image, when given, gets one flag per id.
std::vector<int64_t> encode_with_images(const text::Tokenizer& tokenizer, std::string_view text,
                                        const ImagePlaceholder& placeholder, int64_t* placeholders = nullptr,
                                        std::vector<uint8_t>* is_image = nullptr);

class DocumentEncoder {
 public:
  DocumentEncoder(const text::Tokenizer& tokenizer, text::ChatTemplate chat_template,
                  std::optional<ImagePlaceholder> image = std::nullopt);

  // An unknown role is an InputError (without a place: the caller knows the file and line).
  EncodedDocument encode(const Document& document) const;

 private:
  const text::Tokenizer& tokenizer_;
  text::ChatTemplate chat_template_;
  std::optional<ImagePlaceholder> image_;
};

}  // namespace xtrain::data
