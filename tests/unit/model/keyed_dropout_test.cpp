// Keyed dropout (model/layers/keyed_dropout.h): the drop rate is p, a slice computed with its
// offsets is the slice of the whole (what a rank of any layout computes), and the masks are
// pure functions of their key.
#include <torch/torch.h>

#include <catch2/catch.hpp>

#include "model/layers/keyed_dropout.h"

namespace {

using xtrain::model::attention_keep_mask;
using xtrain::model::DropoutKey;
using xtrain::model::DropoutSite;
using xtrain::model::hidden_keep_mask;

// Tokens of `rows` samples of `seq` tokens starting at sample `first`: sample * seq + position.
DropoutKey key_of(int64_t first, int64_t rows, int64_t seq, uint64_t seed = 1234, int64_t step = 7) {
  auto tokens = torch::arange(first, first + rows, torch::kLong).view({-1, 1}) * seq + torch::arange(seq, torch::kLong);
  return {seed, step, tokens};
}

double drop_rate(const torch::Tensor& keep) { return 1.0 - keep.to(torch::kDouble).mean().item<double>(); }

}  // namespace

TEST_CASE("keyed dropout drops at rate p, hidden and attention masks alike", "[dropout]") {
  const auto key = key_of(0, 16, 256);
  const double hidden = drop_rate(hidden_keep_mask(key, 3, DropoutSite::mlp_output, 256, 0, 0.1));  // 1M elements
  const double attention = drop_rate(attention_keep_mask(key, 3, 16, 0, 0.1));                     // 1M elements
  INFO("hidden drop rate " << hidden << ", attention drop rate " << attention);
  CHECK(hidden == Approx(0.1).margin(0.005));
  CHECK(attention == Approx(0.1).margin(0.005));
  CHECK(std::abs(drop_rate(hidden_keep_mask(key, 0, DropoutSite::embeddings, 256, 0, 0.5)) - 0.5) <= 0.005);
  // Two sites' masks are independent: both drop an element at rate p^2 (0.01), not p.
  const auto a = hidden_keep_mask(key, 3, DropoutSite::mlp_output, 256, 0, 0.1).logical_not();
  const auto b = hidden_keep_mask(key, 3, DropoutSite::attention_output, 256, 0, 0.1).logical_not();
  CHECK(std::abs(a.logical_and(b).to(torch::kDouble).mean().item<double>() - 0.01) <= 0.002);
  // Neighbouring features and tokens are not correlated either.
  const auto next_feature = a.narrow(2, 0, 255).logical_and(a.narrow(2, 1, 255)).to(torch::kDouble).mean();
  const auto next_token = a.narrow(1, 0, 255).logical_and(a.narrow(1, 1, 255)).to(torch::kDouble).mean();
  CHECK(std::abs(next_feature.item<double>() - 0.01) <= 0.002);
  CHECK(std::abs(next_token.item<double>() - 0.01) <= 0.002);
}

TEST_CASE("keyed dropout: a slice computed with its offsets is the slice of the whole", "[dropout]") {
  const int64_t seq = 32;
  const auto whole = key_of(100, 8, seq);
  const auto hidden = hidden_keep_mask(whole, 1, DropoutSite::attention_output, 64, 0, 0.1);
  // A data-parallel rank's samples 4..7 of the 8, and a tensor-parallel rank's features 32..63.
  const auto rank_samples = key_of(104, 4, seq);
  CHECK(torch::equal(hidden_keep_mask(rank_samples, 1, DropoutSite::attention_output, 64, 0, 0.1),
                     hidden.narrow(0, 4, 4)));
  CHECK(torch::equal(hidden_keep_mask(whole, 1, DropoutSite::attention_output, 32, 32, 0.1), hidden.narrow(2, 32, 32)));
  // Samples in another order (another rank's rows, or a packed row): each sample's own mask.
  const auto reordered = DropoutKey{whole.seed, whole.step, whole.tokens.index_select(0, torch::tensor({5, 2}))};
  CHECK(torch::equal(hidden_keep_mask(reordered, 1, DropoutSite::attention_output, 64, 0, 0.1),
                     hidden.index_select(0, torch::tensor({5, 2}))));
  // Attention heads 2..3 of 4 on a tensor-parallel rank.
  const auto attention = attention_keep_mask(whole, 1, 4, 0, 0.1);
  CHECK(torch::equal(attention_keep_mask(whole, 1, 2, 2, 0.1), attention.narrow(1, 2, 2)));
  CHECK(torch::equal(attention_keep_mask(rank_samples, 1, 4, 0, 0.1), attention.narrow(0, 4, 4)));
}

TEST_CASE("keyed dropout is deterministic and differs by seed, step, layer and site", "[dropout]") {
  const auto key = key_of(0, 4, 64);
  const auto mask = hidden_keep_mask(key, 2, DropoutSite::mlp_output, 64, 0, 0.1);
  CHECK(torch::equal(mask, hidden_keep_mask(key_of(0, 4, 64), 2, DropoutSite::mlp_output, 64, 0, 0.1)));
  CHECK(!torch::equal(mask, hidden_keep_mask(key_of(0, 4, 64, 1235), 2, DropoutSite::mlp_output, 64, 0, 0.1)));
  CHECK(!torch::equal(mask, hidden_keep_mask(key_of(0, 4, 64, 1234, 8), 2, DropoutSite::mlp_output, 64, 0, 0.1)));
  CHECK(!torch::equal(mask, hidden_keep_mask(key, 3, DropoutSite::mlp_output, 64, 0, 0.1)));
  CHECK(!torch::equal(mask, hidden_keep_mask(key, 2, DropoutSite::embeddings, 64, 0, 0.1)));
  // Query a with key b is not key a with query b.
  const auto attention = attention_keep_mask(key, 0, 1, 0, 0.3);
  CHECK(!torch::equal(attention, attention.transpose(-2, -1)));
}

TEST_CASE("keyed dropout scales kept elements by 1 / (1 - p), and is off without a key or at p 0", "[dropout]") {
  const auto key = key_of(0, 2, 16);
  const auto x = torch::randn({2, 16, 8}, torch::dtype(torch::kFloat64));
  const auto keep = hidden_keep_mask(key, 0, DropoutSite::mlp_output, 8, 0, 0.25);
  const auto y = xtrain::model::hidden_dropout(x, 0.25, key, 0, DropoutSite::mlp_output);
  CHECK(torch::allclose(y, torch::where(keep, x / 0.75, torch::zeros_like(x)), 0, 1e-15));
  CHECK(torch::equal(xtrain::model::hidden_dropout(x, 0.25, DropoutKey{}, 0, DropoutSite::mlp_output), x));
  CHECK(torch::equal(xtrain::model::hidden_dropout(x, 0.0, key, 0, DropoutSite::mlp_output), x));
  const auto probs = torch::softmax(torch::randn({2, 3, 16, 16}, torch::dtype(torch::kFloat64)), -1);
  const auto dropped = xtrain::model::attention_dropout(probs, 0.25, key, 1);
  CHECK(torch::allclose(dropped, torch::where(attention_keep_mask(key, 1, 3, 0, 0.25), probs / 0.75,
                                              torch::zeros_like(probs)), 0, 1e-15));
}

TEST_CASE("keyed dropout: a cross-attention mask is hashed over queries x keys, the block of the square of both",
          "[dropout]") {
  // 7 decoder tokens query 12 encoder tokens (each stack its own columns of the rows' tokens).
  const auto rows = key_of(40, 3, 19);
  const DropoutKey queries{rows.seed, rows.step, rows.tokens.narrow(1, 12, 7)};
  const DropoutKey keys{rows.seed, rows.step, rows.tokens.narrow(1, 0, 12)};
  const auto cross = attention_keep_mask(queries, keys, 5, 4, 0, 0.3);
  CHECK(cross.sizes() == torch::IntArrayRef({3, 4, 7, 12}));
  CHECK(std::abs(drop_rate(cross) - 0.3) < 0.05);
  // The same masks as the self-attention mask of both side by side, at the queries' rows and the
  // keys' columns, without its [19, 19] square.
  const DropoutKey both{rows.seed, rows.step, torch::cat({queries.tokens, keys.tokens}, 1)};
  CHECK(torch::equal(cross, attention_keep_mask(both, 5, 4, 0, 0.3).narrow(2, 0, 7).narrow(3, 7, 12)));
  CHECK(torch::equal(attention_keep_mask(queries, keys, 5, 2, 2, 0.3), cross.narrow(1, 2, 2)));
  CHECK(torch::equal(attention_keep_mask(queries, queries, 5, 4, 0, 0.3), attention_keep_mask(queries, 5, 4, 0, 0.3)));
}

TEST_CASE("a LoRA adapter's input has a site of its own, 2^32 + the FNV-1a hash of its module's name", "[dropout]") {
  // FNV-1a 32's published test vectors: "" -> 0x811c9dc5, "a" -> 0xe40c292c, "foobar" -> 0xbf9cf968.
  CHECK(static_cast<int64_t>(xtrain::model::adapter_site("")) == (int64_t{1} << 32) + 0x811c9dc5LL);
  CHECK(static_cast<int64_t>(xtrain::model::adapter_site("a")) == (int64_t{1} << 32) + 0xe40c292cLL);
  CHECK(static_cast<int64_t>(xtrain::model::adapter_site("foobar")) == (int64_t{1} << 32) + 0xbf9cf968LL);
  const auto key = key_of(0, 2, 16);
  const auto q = hidden_keep_mask(key, 0, xtrain::model::adapter_site("q_proj"), 64, 0, 0.5);
  const auto k = hidden_keep_mask(key, 0, xtrain::model::adapter_site("k_proj"), 64, 0, 0.5);
  const auto output = hidden_keep_mask(key, 0, DropoutSite::attention_output, 64, 0, 0.5);
  CHECK_FALSE(torch::equal(q, k));
  CHECK_FALSE(torch::equal(q, output));
}
