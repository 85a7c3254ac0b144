// MergeBpe: the BPE model of a Hugging Face tokenizer.json over byte-level pieces. A piece
// starts as one symbol per byte; the adjacent pair with the lowest merge rank (leftmost on
// ties) is replaced by its merged token until no adjacent pair has a merge — Hugging Face's
// Word::merge_all, with its heap. Unlike tiktoken's merge it ranks token pairs, not the bytes
// of their concatenation, so it follows the merges list exactly.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace xtrain::text {

class MergeBpe {
 public:
  struct Options {
    int64_t unk_id = -1;         // id for a byte with no token; -1 drops such bytes
    bool fuse_unk = false;       // consecutive unknown bytes become one unk_id
    bool byte_fallback = false;  // a byte with no token becomes its <0xXX> token when there is one
    bool ignore_merges = false;  // a piece that is a token is that token, merges or not
  };

  // vocab: raw bytes -> id; merges: (left id, right id, merged id) in rank order.
  struct Merge {
    int64_t left, right, merged;
  };
  MergeBpe(std::unordered_map<std::string, int64_t> vocab, const std::vector<Merge>& merges, Options options);

  // Appends the ids of one pre-tokenized piece (raw bytes).
  void encode(std::string_view piece, std::vector<int64_t>& out) const;

 private:
  static uint64_t pair_key(int64_t left, int64_t right) {
    return (static_cast<uint64_t>(left) << 32) | static_cast<uint64_t>(right);
  }

  std::unordered_map<std::string, int64_t> vocab_;
  std::unordered_map<uint64_t, std::pair<uint32_t, int64_t>> merges_;  // pair -> (rank, merged id)
  int64_t byte_id_[256];      // the token of each single byte, or -1
  int64_t fallback_id_[256];  // the <0xXX> token of each byte, or -1
  Options options_;
};

}  // namespace xtrain::text
