#include "text/byte_tokenizer.h"

namespace xtrain::text {

std::vector<int64_t> ByteTokenizer::encode(std::string_view text) const {
  // Cast through unsigned char: plain char is signed on x86, and bytes >= 0x80 must map to
  // ids 128..255, not to negative ids.
  std::vector<int64_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
  return ids;
}

std::string ByteTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string text;
  text.reserve(ids.size());
  for (int64_t id : ids) {
    if (id >= 0 && id < 256) text.push_back(static_cast<char>(static_cast<unsigned char>(id)));
  }
  return text;
}

}  // namespace xtrain::text
