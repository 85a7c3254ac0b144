#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <set>

#include "data/token_dataset.h"
#include "util/input_error.h"

using xtrain::text::make_tokenizer;
using xtrain::data::TokenDataset;

namespace {

std::vector<int64_t> to_vector(const torch::Tensor& t) {
  const torch::Tensor c = t.contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

// 40 documents of 9 bytes + eos = 400 tokens: 40 samples of seq_len 9.
std::vector<std::string> numbered_documents() {
  std::vector<std::string> documents;
  for (int i = 0; i < 40; ++i) documents.push_back("doc " + std::to_string(10000 + i));
  return documents;
}

// The samples at global indices first .. first + count - 1.
std::vector<std::vector<int64_t>> read_samples(const TokenDataset& dataset, int64_t first,
                                               int64_t count) {
  std::vector<std::vector<int64_t>> samples;
  for (int64_t g = first; g < first + count; ++g) samples.push_back(to_vector(dataset.sample(g)));
  return samples;
}

}  // namespace

TEST_CASE("documents are joined with eos and cut into windows of seq_len + 1", "[data]") {
  const auto tokenizer = make_tokenizer("byte");
  const TokenDataset dataset({"ab", "cde"}, *tokenizer, 3, 0, /*shuffle=*/false);
  // Stream: a b <eos> c d e <eos> -> one window of 4, the last 3 tokens are unused.
  CHECK(dataset.num_tokens() == 7);
  CHECK(dataset.seq_len() == 3);
  CHECK(dataset.num_samples() == 1);
  const torch::Tensor sample = dataset.sample(0);
  CHECK(sample.dtype() == torch::kInt64);
  CHECK(sample.sizes() == torch::IntArrayRef{4});
  CHECK(to_vector(sample) == std::vector<int64_t>{'a', 'b', 256, 'c'});

  const TokenDataset pairs({"ab", "cd", "ef"}, *tokenizer, 2, 0, false);
  CHECK(pairs.num_samples() == 3);
  CHECK(to_vector(pairs.sample(1)) == std::vector<int64_t>{'c', 'd', 256});
  CHECK(to_vector(pairs.sample(4)) == to_vector(pairs.sample(1)));  // epoch 1, unshuffled
}

TEST_CASE("too little data for one sample is an input error", "[data]") {
  const auto tokenizer = make_tokenizer("byte");
  CHECK_THROWS_AS(TokenDataset({"abc"}, *tokenizer, 4, 0, false), xtrain::InputError);
  CHECK_THROWS_WITH(TokenDataset({"abc"}, *tokenizer, 4, 0, false),
                    Catch::Contains("has 4 tokens") && Catch::Contains("at least 5"));
  // "abc" and its eos are exactly one sample of 3 inputs and the target after them.
  const TokenDataset just_enough({"abc"}, *tokenizer, 3, 0, false);
  CHECK(just_enough.num_samples() == 1);
  CHECK(to_vector(just_enough.sample(0)) == std::vector<int64_t>{'a', 'b', 'c', 256});
}

TEST_CASE("shuffled sample order is a deterministic function of the seed", "[data]") {
  const auto tokenizer = make_tokenizer("byte");
  const auto documents = numbered_documents();
  const TokenDataset a(documents, *tokenizer, 9, 1234, true);
  const TokenDataset same_seed(documents, *tokenizer, 9, 1234, true);
  const TokenDataset other_seed(documents, *tokenizer, 9, 99, true);
  const TokenDataset in_order(documents, *tokenizer, 9, 1234, false);
  REQUIRE(a.num_samples() == 40);

  const auto epochs_a = read_samples(a, 0, 80);
  CHECK(read_samples(same_seed, 0, 80) == epochs_a);
  CHECK(read_samples(other_seed, 0, 80) != epochs_a);

  SECTION("each epoch is a permutation of all samples, in a new order") {
    const auto unshuffled = read_samples(in_order, 0, 40);
    const std::vector<std::vector<int64_t>> epoch0(epochs_a.begin(), epochs_a.begin() + 40);
    const std::vector<std::vector<int64_t>> epoch1(epochs_a.begin() + 40, epochs_a.end());
    CHECK(epoch0 != unshuffled);
    CHECK(epoch0 != epoch1);
    const std::set<std::vector<int64_t>> all(unshuffled.begin(), unshuffled.end());
    REQUIRE(all.size() == 40);
    CHECK(std::set<std::vector<int64_t>>(epoch0.begin(), epoch0.end()) == all);
    CHECK(std::set<std::vector<int64_t>>(epoch1.begin(), epoch1.end()) == all);
  }

  SECTION("the order does not depend on where reading starts") {
    // A fresh dataset that starts mid-epoch 1 (a resumed run) sees the same samples, and
    // jumping back to an earlier epoch recomputes that epoch's order.
    const TokenDataset resumed(documents, *tokenizer, 9, 1234, true);
    const auto tail = read_samples(resumed, 57, 23);
    CHECK(tail == std::vector<std::vector<int64_t>>(epochs_a.begin() + 57, epochs_a.end()));
    CHECK(read_samples(resumed, 3, 5) ==
          std::vector<std::vector<int64_t>>(epochs_a.begin() + 3, epochs_a.begin() + 8));
  }
}

TEST_CASE("batch equals stacked samples", "[data]") {
  const auto tokenizer = make_tokenizer("byte");
  const TokenDataset dataset(numbered_documents(), *tokenizer, 9, 7, true);
  // Crosses the boundary between epochs 0 and 1.
  const torch::Tensor batch = dataset.batch(35, 8);
  CHECK(batch.sizes() == torch::IntArrayRef{8, 10});
  CHECK(batch.dtype() == torch::kInt64);
  std::vector<torch::Tensor> rows;
  for (int64_t g = 35; g < 43; ++g) rows.push_back(dataset.sample(g));
  CHECK(torch::equal(batch, torch::stack(rows)));
  CHECK(dataset.batch(0, 0).sizes() == torch::IntArrayRef{0, 10});
}

TEST_CASE("unigram entropy of the token stream", "[data]") {
  const auto tokenizer = make_tokenizer("byte");
  // Stream a b <eos> a b <eos>: three equally frequent tokens.
  const TokenDataset uniform({"ab", "ab"}, *tokenizer, 2, 0, false);
  CHECK(uniform.unigram_entropy() == Approx(std::log(3.0)));
  // Stream a b a b <eos>: p = 2/5, 2/5, 1/5; eos counts like any other token.
  const TokenDataset skewed({"abab"}, *tokenizer, 2, 0, false);
  const double expected = -(2 * 0.4 * std::log(0.4) + 0.2 * std::log(0.2));
  CHECK(skewed.unigram_entropy() == Approx(expected));
  // A single repeated token carries no information.
  const TokenDataset constant({"", ""}, *tokenizer, 1, 0, false);
  CHECK(constant.unigram_entropy() == 0.0);
}
