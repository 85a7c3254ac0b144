#include <catch2/catch.hpp>

#include <random>

#include "text/merge_bpe.h"

using xtrain::text::MergeBpe;

namespace {

struct Toy {
  std::unordered_map<std::string, int64_t> vocab;
  std::vector<MergeBpe::Merge> merges;
  std::vector<std::string> text_of;
};

// Bytes a..d and merges chosen so that pair order, not token order, decides: "abc" is reachable
// from ab+c and from a+bc, with different ranks.
Toy toy() {
  Toy t;
  auto id = [&](const std::string& s) {
    if (!t.vocab.count(s)) {
      t.vocab[s] = static_cast<int64_t>(t.text_of.size());
      t.text_of.push_back(s);
    }
    return t.vocab[s];
  };
  for (const char* s : {"a", "b", "c", "d"}) id(s);
  for (auto [l, r] : std::vector<std::pair<std::string, std::string>>{
           {"b", "c"}, {"a", "b"}, {"a", "bc"}, {"c", "d"}, {"ab", "ab"}, {"d", "d"}, {"abc", "d"}, {"dd", "dd"},
           {"b", "a"}, {"ba", "ba"}, {"c", "c"}, {"abab", "cd"}, {"a", "a"}}) {
    t.merges.push_back({id(l), id(r), id(l + r)});
  }
  return t;
}

// Hugging Face's rule without the heap: merge the lowest-ranked adjacent pair, leftmost first.
std::vector<int64_t> reference(const Toy& t, const std::string& piece) {
  std::vector<int64_t> symbols;
  for (char c : piece) symbols.push_back(t.vocab.at(std::string(1, c)));
  while (true) {
    size_t best = SIZE_MAX, best_rank = SIZE_MAX;
    for (size_t i = 0; i + 1 < symbols.size(); ++i)
      for (size_t r = 0; r < t.merges.size() && r < best_rank; ++r)
        if (t.merges[r].left == symbols[i] && t.merges[r].right == symbols[i + 1]) best = i, best_rank = r;
    if (best == SIZE_MAX) return symbols;
    symbols[best] = t.merges[best_rank].merged;
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
}

}  // namespace

TEST_CASE("merge BPE follows the merge list's pair ranks", "[data][tokenizer]") {
  const Toy t = toy();
  const MergeBpe bpe(t.vocab, t.merges, {});
  std::mt19937 rng(3);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string piece(1 + rng() % (trial < 1900 ? 20 : 2000), 'a');
    for (char& c : piece) c = "abcd"[rng() % 4];
    std::vector<int64_t> ids;
    bpe.encode(piece, ids);
    REQUIRE(ids == reference(t, piece));
  }
  std::vector<int64_t> ids;
  bpe.encode("abc", ids);  // b+c ranks before a+b, so a + bc -> abc
  CHECK(ids == std::vector<int64_t>{t.vocab.at("abc")});
}

TEST_CASE("merge BPE options: ignore_merges, unknown bytes, byte fallback", "[data][tokenizer]") {
  Toy t = toy();
  t.vocab["cab"] = 100;  // a token no merge produces
  std::vector<int64_t> ids;
  MergeBpe(t.vocab, t.merges, {}).encode("cab", ids);
  CHECK(ids == std::vector<int64_t>{t.vocab.at("c"), t.vocab.at("ab")});
  MergeBpe::Options ignore;
  ignore.ignore_merges = true;
  ids.clear();
  MergeBpe(t.vocab, t.merges, ignore).encode("cab", ids);
  CHECK(ids == std::vector<int64_t>{100});

  // Bytes without a token: dropped, or unk (fused or not), or <0xXX>.
  ids.clear();
  MergeBpe(t.vocab, t.merges, {}).encode("axyb", ids);
  CHECK(ids == std::vector<int64_t>{t.vocab.at("ab")});  // what remains merges, as in Hugging Face's
  MergeBpe::Options unk;
  unk.unk_id = 99;
  ids.clear();
  MergeBpe(t.vocab, t.merges, unk).encode("axyb", ids);
  CHECK(ids == std::vector<int64_t>{t.vocab.at("a"), 99, 99, t.vocab.at("b")});
  unk.fuse_unk = true;
  ids.clear();
  MergeBpe(t.vocab, t.merges, unk).encode("axyb", ids);
  CHECK(ids == std::vector<int64_t>{t.vocab.at("a"), 99, t.vocab.at("b")});
  t.vocab["<0x78>"] = 120;
  MergeBpe::Options fallback;
  fallback.byte_fallback = true;
  ids.clear();
  MergeBpe(t.vocab, t.merges, fallback).encode("xa", ids);
  CHECK(ids == std::vector<int64_t>{120, t.vocab.at("a")});
}

TEST_CASE("merge BPE: a pair listed twice takes its last rank", "[data][tokenizer]") {
  const std::unordered_map<std::string, int64_t> vocab{{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"bc", 4}};
  // b+c, a+b, b+c again: a+b (rank 1) now ranks before b+c (rank 2), as the library has it.
  const MergeBpe bpe(vocab, {{1, 2, 4}, {0, 1, 3}, {1, 2, 4}}, {});
  std::vector<int64_t> ids;
  bpe.encode("abc", ids);
  CHECK(ids == std::vector<int64_t>{3, 2});
}
