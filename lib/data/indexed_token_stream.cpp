#include "data/indexed_token_stream.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "util/input_error.h"

namespace xtrain::data {

IndexedTokenStream::IndexedTokenStream(const std::string& prefix, int64_t vocab_size)
    : tokens_(prefix), vocab_size_(vocab_size) {
  if (!is_integer(tokens_.dtype()))
    throw InputError(fmt::format("{}: holds {} values, not token ids (expected an integer dtype)",
                                 index_path(prefix), indexed_dtype_name(tokens_.dtype())));
  const std::string mask_prefix = loss_mask_prefix(prefix);
  if (::access(index_path(mask_prefix).c_str(), F_OK) == 0) {
    loss_mask_.emplace(mask_prefix);
    bool same = loss_mask_->dtype() == IndexedDType::UInt8 &&
                loss_mask_->num_sequences() == tokens_.num_sequences();
    for (int64_t i = 0; same && i < tokens_.num_sequences(); ++i)
      same = loss_mask_->sequence_size(i) == tokens_.sequence_size(i);
    if (!same)
      throw InputError(fmt::format("{}: not the loss mask of {} (it must be uint8 with the same sequence sizes); "
                                   "write both again with xtrain data prepare",
                                   index_path(mask_prefix), index_path(prefix)));
  }
  const int64_t checked = std::min<int64_t>(size(), 1 << 20);
  std::vector<int64_t> ids(static_cast<size_t>(checked));
  read(0, checked, ids.data());
}

void IndexedTokenStream::check_ids(const int64_t* ids, int64_t count, int64_t begin) const {
  for (int64_t i = 0; i < count; ++i)
    if (ids[i] < 0 || ids[i] >= vocab_size_)
      throw InputError(fmt::format("megatron:{}: token {} has id {}, outside the tokenizer's {} ids; the data was "
                                   "written with another tokenizer (set data.tokenizer to that one)",
                                   tokens_.prefix(), begin + i, ids[i], vocab_size_));
}

void IndexedTokenStream::read(int64_t begin, int64_t count, int64_t* out) const {
  tokens_.tokens().copy_to(begin, count, out);
  check_ids(out, count, begin);
}

void IndexedTokenStream::read_loss_mask(int64_t begin, int64_t count, uint8_t* out) const {
  if (!loss_mask_) {
    std::fill(out, out + count, 1);
    return;
  }
  const TokenView mask = loss_mask_->tokens().slice(begin, count);
  std::memcpy(out, mask.data(), static_cast<size_t>(count));
}

void IndexedTokenStream::document_starts(int64_t begin, int64_t count, std::vector<int64_t>& out) const {
  // The sequence starts rise with the index: a binary search finds the first after begin.
  int64_t low = 0, high = tokens_.num_sequences();
  while (low < high) {
    const int64_t middle = low + (high - low) / 2;
    if (tokens_.sequence_start(middle) <= begin)
      low = middle + 1;
    else
      high = middle;
  }
  for (int64_t i = low; i < tokens_.num_sequences(); ++i) {
    const int64_t start = tokens_.sequence_start(i);
    if (start > begin + count) break;
    out.push_back(start);
  }
}

}  // namespace xtrain::data
