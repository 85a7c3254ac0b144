#include "data/token_stream.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace xtrain::data {
namespace {

void check_range(int64_t begin, int64_t count, int64_t size) {
  if (begin < 0 || count < 0 || begin + count > size)
    throw std::out_of_range("tokens [" + std::to_string(begin) + ", " + std::to_string(begin + count) +
                            ") outside a stream of " + std::to_string(size));
}

}  // namespace

void InMemoryTokenStream::append(const EncodedDocument& document) {
  const bool masked = !document.loss_mask.empty();
  // The first masked document gives the stream a mask: every token before it was a target.
  if (masked && loss_mask_.empty()) loss_mask_.assign(tokens_.size(), 1);
  document_starts_.push_back(size());
  tokens_.insert(tokens_.end(), document.tokens.begin(), document.tokens.end());
  if (masked)
    loss_mask_.insert(loss_mask_.end(), document.loss_mask.begin(), document.loss_mask.end());
  else if (!loss_mask_.empty())
    loss_mask_.insert(loss_mask_.end(), document.tokens.size(), 1);
}

void InMemoryTokenStream::read(int64_t begin, int64_t count, int64_t* out) const {
  check_range(begin, count, size());
  std::memcpy(out, tokens_.data() + begin, sizeof(int64_t) * static_cast<size_t>(count));
}

void InMemoryTokenStream::read_loss_mask(int64_t begin, int64_t count, uint8_t* out) const {
  check_range(begin, count, size());
  if (loss_mask_.empty()) {
    std::fill(out, out + count, 1);
    return;
  }
  std::memcpy(out, loss_mask_.data() + begin, static_cast<size_t>(count));
}

void InMemoryTokenStream::document_starts(int64_t begin, int64_t count, std::vector<int64_t>& out) const {
  auto it = std::upper_bound(document_starts_.begin(), document_starts_.end(), begin);
  for (; it != document_starts_.end() && *it <= begin + count; ++it) out.push_back(*it);
}

}  // namespace xtrain::data
