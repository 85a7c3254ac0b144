#include "data/document_encoder.h"

#include <utility>

#include <fmt/format.h>

#include "util/input_error.h"

namespace xtrain::data {

DocumentEncoder::DocumentEncoder(const text::Tokenizer& tokenizer, text::ChatTemplate chat_template,
                                 std::optional<ImagePlaceholder> image)
    : tokenizer_(tokenizer), chat_template_(std::move(chat_template)), image_(std::move(image)) {}

std::vector<int64_t> encode_with_images(const text::Tokenizer& tokenizer, std::string_view text,
                                        const ImagePlaceholder& placeholder, int64_t* placeholders,
                                        std::vector<uint8_t>* is_image) {
  std::vector<int64_t> ids;
  auto append = [&](const std::vector<int64_t>& more, bool image) {
    ids.insert(ids.end(), more.begin(), more.end());
    if (is_image) is_image->insert(is_image->end(), more.size(), image ? 1 : 0);
  };
  const std::vector<int64_t> image_ids(static_cast<size_t>(placeholder.tokens), placeholder.id);
  int64_t count = 0;
  size_t begin = 0;
  for (size_t at = text.find(placeholder.text); at != std::string_view::npos;
       at = text.find(placeholder.text, begin)) {
    if (at > begin) append(tokenizer.encode(text.substr(begin, at - begin)), false);
    append(image_ids, true);
    begin = at + placeholder.text.size();
    ++count;
  }
  if (begin < text.size()) append(tokenizer.encode(text.substr(begin)), false);
  if (placeholders) *placeholders = count;
  return ids;
}

EncodedDocument DocumentEncoder::encode(const Document& document) const {
  EncodedDocument encoded;
  if (!document.is_conversation) {
    encoded.tokens = tokenizer_.encode(document.text);
    encoded.tokens.push_back(tokenizer_.eos_id());
    return encoded;
  }
  if (!image_ && !document.images.empty())
    throw InputError("the record has \"images\", but the model takes no images: image chat needs a "
                     "vision-language family (model.family llava)");
  int64_t placeholders = 0;
  for (const auto& segment : chat_template_.render(document.messages)) {
    int64_t in_segment = 0;
    std::vector<uint8_t> is_image;
    const std::vector<int64_t> ids =
        image_ ? encode_with_images(tokenizer_, segment.text, *image_, &in_segment, &is_image)
               : tokenizer_.encode(segment.text);
    encoded.tokens.insert(encoded.tokens.end(), ids.begin(), ids.end());
    for (size_t i = 0; i < ids.size(); ++i)
      encoded.loss_mask.push_back(segment.loss && (is_image.empty() || !is_image[i]) ? 1 : 0);
    placeholders += in_segment;
  }
  if (image_ && placeholders != static_cast<int64_t>(document.images.size()))
    throw InputError(fmt::format("{} \"{}\" placeholder{} in the messages but {} image{} in \"images\": each image "
                                 "needs its placeholder where it belongs in the text",
                                 placeholders, image_->text, placeholders == 1 ? "" : "s", document.images.size(),
                                 document.images.size() == 1 ? "" : "s"));
  encoded.tokens.push_back(tokenizer_.eos_id());
  encoded.loss_mask.push_back(0);
  return encoded;
}

}  // namespace xtrain::data
