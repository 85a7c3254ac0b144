#include "text/wordpiece_model.h"

#include "text/utf8.h"

namespace xtrain::text {

WordPieceModel::WordPieceModel(const std::vector<std::pair<std::string, int64_t>>& vocab, Options options)
    : options_(std::move(options)) {
  // The views are taken once text_ is complete, so that no reallocation moves it under them.
  std::vector<size_t> offsets;
  offsets.reserve(vocab.size());
  for (const auto& [token, id] : vocab) {
    offsets.push_back(text_.size());
    text_ += token;
  }
  const std::string_view all(text_);
  const std::string_view prefix(options_.continuing_subword_prefix);
  whole_.reserve(vocab.size());
  for (size_t i = 0; i < vocab.size(); ++i) {
    const std::string_view token = all.substr(offsets[i], vocab[i].first.size());
    const int64_t id = vocab[i].second;
    whole_.emplace(token, id);
    if (token.size() >= prefix.size() && token.substr(0, prefix.size()) == prefix)
      continuing_.emplace(token.substr(prefix.size()), id);
  }
}

void WordPieceModel::encode(std::string_view word, std::vector<int64_t>& ids) const {
  size_t characters = 0;
  for (char byte : word) characters += (static_cast<unsigned char>(byte) & 0xC0) != 0x80;
  if (characters > options_.max_input_chars_per_word) {
    ids.push_back(options_.unk_id);
    return;
  }
  const size_t first = ids.size();
  for (size_t start = 0; start < word.size();) {
    const auto& tokens = start == 0 ? whole_ : continuing_;
    std::string_view candidate = word.substr(start);
    int64_t found = -1;
    while (!candidate.empty()) {
      if (auto it = tokens.find(candidate); it != tokens.end()) {
        found = it->second;
        break;
      }
      size_t end = candidate.size();
      utf8::previous(candidate, end);  // drop the last character
      candidate = candidate.substr(0, end);
    }
    if (found < 0) {  // one piece has no token: the whole word is unknown
      ids.resize(first);
      ids.push_back(options_.unk_id);
      return;
    }
    ids.push_back(found);
    start += candidate.size();
  }
}

}  // namespace xtrain::text
