// The masked-LM objective's samples: [CLS] + the window, 15% of the ordinary tokens chosen and
// split 80/10/10 between [MASK], a random token and the token itself, only the chosen ones
// carrying a target; the same masks for the same (seed, sample) whatever reads them.
#include <catch2/catch.hpp>

#include <memory>

#include "data/masked_lm_dataset.h"
#include "data/micro_batch.h"
#include "data/token_dataset.h"
#include "text/tokenizer.h"

using namespace xtrain::data;

namespace {

constexpr int64_t kCls = 257, kMask = 258, kSep = 256;  // the byte tokenizer's eos is 256

std::unique_ptr<MaskedLmDataset> masked_dataset(int64_t seq_len, uint64_t seed, bool long_documents = true) {
  static const auto tokenizer = xtrain::text::make_tokenizer("byte");
  std::vector<std::string> documents;
  for (int i = 0; i < 400; ++i)
    documents.push_back(long_documents ? "the quick brown fox jumps over the lazy dog " + std::to_string(i) : "ab");
  auto base = std::make_unique<TokenDataset>(documents, *tokenizer, seq_len, 0, /*shuffle=*/false);
  MaskedLmOptions options{0.15, kCls, kMask, {kSep, kCls, kMask}, 259, seed};
  return std::make_unique<MaskedLmDataset>(std::move(base), options);
}

}  // namespace

TEST_CASE("masked-LM samples: [CLS] first, 15% of ordinary tokens chosen, 80/10/10, targets only there",
          "[data][mlm]") {
  const auto dataset = masked_dataset(64, 7);
  const int64_t count = 200;
  const auto batch = dataset->batch(0, count);
  const auto targets = dataset->targets(0, count);
  REQUIRE(batch.sizes() == torch::IntArrayRef({count, 65}));
  REQUIRE(targets.sizes() == torch::IntArrayRef({count, 64}));
  const auto inputs = batch.narrow(1, 0, 64);
  CHECK(inputs.select(1, 0).eq(kCls).all().item<bool>());
  CHECK(targets.select(1, 0).eq(kIgnoreIndex).all().item<bool>());
  const auto chosen = targets.ne(kIgnoreIndex);
  // Special tokens are never chosen; the window's tokens are [CLS]'s successors.
  CHECK(targets.masked_select(chosen).ne(kSep).all().item<bool>());
  int64_t ordinary = 0;
  for (int64_t g = 0; g < count; ++g) {
    const auto row = inputs[g];
    ordinary += row.narrow(0, 1, 63).ne(kSep).sum().item<int64_t>();
  }
  const double chosen_share = static_cast<double>(chosen.sum().item<int64_t>()) / static_cast<double>(ordinary);
  CHECK(chosen_share > 0.14);
  CHECK(chosen_share < 0.16);
  const auto at_chosen = inputs.masked_select(chosen);
  const auto truth = targets.masked_select(chosen);
  const double n = static_cast<double>(truth.numel());
  const double masked = static_cast<double>(at_chosen.eq(kMask).sum().item<int64_t>()) / n;
  const double kept = static_cast<double>(at_chosen.eq(truth).sum().item<int64_t>()) / n;
  CHECK(masked > 0.77);
  CHECK(masked < 0.83);
  CHECK(kept > 0.08);  // the unchanged 10%, and the random draws that hit the token itself
  CHECK(kept < 0.12);
  // Unchosen positions keep their token and carry no target.
  CHECK(inputs.masked_select(chosen.logical_not()).ne(kMask).all().item<bool>());
}

TEST_CASE("masked-LM masks depend on the seed and the sample only", "[data][mlm]") {
  const auto a = masked_dataset(32, 7), b = masked_dataset(32, 7), other = masked_dataset(32, 8);
  CHECK(torch::equal(a->batch(5, 3), torch::cat({b->batch(5, 1), b->batch(6, 2)})));
  CHECK(torch::equal(a->targets(5, 3), torch::cat({b->targets(5, 2), b->targets(7, 1)})));
  CHECK_FALSE(torch::equal(a->targets(5, 3), other->targets(5, 3)));
}

TEST_CASE("packed masked-LM rows split after each [SEP], and keep every chosen target", "[data][mlm]") {
  const auto dataset = masked_dataset(16, 3, /*long_documents=*/false);  // documents "ab" + [SEP]
  const auto unpacked = make_micro_batch(*dataset, {0, 1}, false);
  const auto packed = make_micro_batch(*dataset, {0, 1}, true);
  CHECK(packed.target_count == unpacked.target_count);
  // Sample 0: [CLS] a b [SEP] a b [SEP] ...: pieces of 4, 3, 3, 3, 3.
  const auto lengths = packed.cu_seqlens.narrow(0, 1, 5) - packed.cu_seqlens.narrow(0, 0, 5);
  CHECK(torch::equal(lengths, torch::tensor({4, 3, 3, 3, 3}, torch::kInt64)));
}
