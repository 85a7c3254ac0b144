#include "text/merge_bpe.h"

#include <queue>

#include <fmt/format.h>

namespace xtrain::text {

MergeBpe::MergeBpe(std::unordered_map<std::string, int64_t> vocab, const std::vector<Merge>& merges, Options options)
    : vocab_(std::move(vocab)), options_(options) {
  for (int byte = 0; byte < 256; ++byte) {
    auto single = vocab_.find(std::string(1, static_cast<char>(byte)));
    byte_id_[byte] = single == vocab_.end() ? -1 : single->second;
    auto fallback = vocab_.find(fmt::format("<0x{:02X}>", byte));
    fallback_id_[byte] = fallback == vocab_.end() ? -1 : fallback->second;
  }
  merges_.reserve(merges.size());
  // A pair listed twice takes its last rank, as in Hugging Face's map built from the list.
  for (size_t rank = 0; rank < merges.size(); ++rank)
    merges_[pair_key(merges[rank].left, merges[rank].right)] =
        std::make_pair(static_cast<uint32_t>(rank), merges[rank].merged);
}

void MergeBpe::encode(std::string_view piece, std::vector<int64_t>& out) const {
  if (piece.empty()) return;
  if (options_.ignore_merges) {
    auto whole = vocab_.find(std::string(piece));
    if (whole != vocab_.end()) {
      out.push_back(whole->second);
      return;
    }
  }
  // Symbols form a linked list; a merged-away symbol is marked dead.
  struct Symbol {
    int64_t id;
    int32_t prev, next;
    bool alive;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(piece.size());
  auto add = [&](int64_t id) {
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, index - 1, index + 1, true});
  };
  int64_t pending_unknown = -1;  // an unk symbol not yet added, so that fuse_unk can extend it
  for (char c : piece) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte_id_[byte] >= 0) {
      if (pending_unknown >= 0) add(pending_unknown), pending_unknown = -1;
      add(byte_id_[byte]);
    } else if (options_.byte_fallback && fallback_id_[byte] >= 0) {
      if (pending_unknown >= 0) add(pending_unknown), pending_unknown = -1;
      add(fallback_id_[byte]);
    } else if (options_.unk_id >= 0) {
      if (pending_unknown >= 0 && !options_.fuse_unk) add(pending_unknown);
      pending_unknown = options_.unk_id;
    }
  }
  if (pending_unknown >= 0) add(pending_unknown);
  if (symbols.empty()) return;
  symbols.back().next = -1;

  struct Candidate {
    uint32_t rank;
    int32_t pos;
    int64_t merged;
    bool operator>(const Candidate& other) const {
      return rank != other.rank ? rank > other.rank : pos > other.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto consider = [&](int32_t left) {
    const int32_t right = symbols[static_cast<size_t>(left)].next;
    if (right < 0) return;
    auto it = merges_.find(pair_key(symbols[static_cast<size_t>(left)].id, symbols[static_cast<size_t>(right)].id));
    if (it != merges_.end()) heap.push({it->second.first, left, it->second.second});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) consider(i);
  while (!heap.empty()) {
    const Candidate top = heap.top();
    heap.pop();
    Symbol& left = symbols[static_cast<size_t>(top.pos)];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = symbols[static_cast<size_t>(left.next)];
    // A stale entry: the pair at this position has changed since it was queued.
    auto it = merges_.find(pair_key(left.id, right.id));
    if (it == merges_.end() || it->second.second != top.merged) continue;
    left.id = top.merged;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = top.pos;
    if (left.prev >= 0) consider(left.prev);
    consider(top.pos);
  }
  for (const Symbol& symbol : symbols)
    if (symbol.alive) out.push_back(symbol.id);
}

}  // namespace xtrain::text
