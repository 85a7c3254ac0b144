// Span corruption against T5's reference (tools/reference/span_corruption.py: transformers'
// DataCollatorForT5MLM from run_t5_mlm_flax.py, after the T5 codebase): the lengths, the
// corruption of given masks token for token, and the noise masks' statistics over 10,000
// samples beside the reference's own 10,000.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include "ckpt/safetensors.h"
#include "data/span_corruption.h"
#include "scratch_dir.h"

using namespace xtrain;

namespace {

// Windows of random ids in [2, 90), a pure function of the sample index.
class RandomWindows final : public data::SampleDataset {
 public:
  explicit RandomWindows(int64_t seq_len) : seq_len_(seq_len) {}
  int64_t num_samples() const override { return 1 << 20; }
  int64_t num_tokens() const override { return num_samples() * seq_len_; }
  int64_t seq_len() const override { return seq_len_; }
  torch::Tensor batch(int64_t first, int64_t count) const override {
    std::vector<torch::Tensor> rows;
    for (int64_t g = first; g < first + count; ++g) {
      auto generator = at::detail::createCPUGenerator(static_cast<uint64_t>(g) + 1);
      rows.push_back(torch::randint(2, 90, {seq_len_ + 1}, generator, torch::kInt64));
    }
    return torch::stack(rows);
  }
  torch::Tensor targets(int64_t first, int64_t count) const override { return batch(first, count).narrow(1, 1, seq_len_); }
  bool has_loss_mask() const override { return false; }
  std::vector<int64_t> document_starts(int64_t) const override { return {}; }
  double unigram_entropy() const override { return 0; }

 private:
  int64_t seq_len_;
};

}  // namespace

TEST_CASE("span corruption's lengths are T5's compute_input_and_target_lengths", "[data][span_corruption]") {
  // T5's pretraining shape: 512 encoder tokens are cut from 568, with 114 decoder tokens.
  const auto t5 = data::span_corruption_lengths(512, 0.15, 3.0);
  CHECK(t5.expanded == 568);
  CHECK(t5.targets == 114);
  CHECK(t5.noise_spans == 28);
  const auto half = data::span_corruption_lengths(64, 0.5, 3.0);  // the 50% adjustment
  CHECK(half.targets <= 64);
}

TEST_CASE("span corruption matches DataCollatorForT5MLM: its corruption of each mask, and its masks' statistics over "
          "10,000 samples",
          "[data][span_corruption]") {
  constexpr int64_t kSamples = 10000, kVocab = 100, kEos = 1;
  data::SpanCorruptionOptions options;
  options.input_length = 64;
  options.vocab_size = kVocab;
  options.eos_id = kEos;
  options.seed = 17;
  const auto lengths = data::span_corruption_lengths(64, 0.15, 3.0);
  const data::SpanCorruptionDataset dataset(std::make_unique<RandomWindows>(lengths.expanded - 1), options);
  CHECK(dataset.seq_len() == 64 + lengths.targets);
  CHECK(dataset.encoder_length() == 64);

  const RandomWindows windows(lengths.expanded - 1);
  auto tokens = torch::empty({kSamples, lengths.expanded}, torch::kInt64);
  auto masks = torch::empty({kSamples, lengths.expanded}, torch::kInt64);
  for (int64_t g = 0; g < kSamples; ++g) {
    tokens[g].copy_(windows.sample(g));
    const auto mask = dataset.noise_mask(g);
    REQUIRE(static_cast<int64_t>(mask.size()) == lengths.expanded);
    for (int64_t i = 0; i < lengths.expanded; ++i) masks[g][i] = static_cast<int64_t>(mask[static_cast<size_t>(i)]);
  }
  testing::ScratchDir scratch;
  const std::string in = (scratch.path() / "masks.safetensors").string();
  const std::string out = (scratch.path() / "reference.safetensors").string();
  ckpt::save_safetensors(in, {{"tokens", tokens}, {"masks", masks}});
  REQUIRE(std::system(fmt::format("{} {}/tools/reference/span_corruption.py --masks {} --out {} --samples {} "
                                  "--vocab-size {} --eos-id {} --seed 5",
                                  XTRAIN_PYTHON, XTRAIN_SOURCE_DIR, in, out, kSamples, kVocab, kEos)
                          .c_str()) == 0);
  const auto reference = ckpt::load_safetensors(out).tensors;

  // The same masks give the same encoder inputs, labels and decoder inputs, token for token.
  const auto rows = dataset.batch(0, kSamples);
  const auto targets = dataset.targets(0, kSamples);
  CHECK(torch::equal(rows.narrow(1, 0, 64), reference.at("input_ids").to(torch::kInt64)));
  CHECK(torch::equal(rows.narrow(1, 64, lengths.targets), reference.at("decoder_input_ids").to(torch::kInt64)));
  CHECK(torch::equal(targets.narrow(1, 64, lengths.targets), reference.at("labels").to(torch::kInt64)));
  CHECK(targets.narrow(1, 0, 64).eq(data::kIgnoreIndex).all().item<bool>());

  // Density and mean span length are the algorithm's counts (equal); where the spans fall is
  // chance: the span lengths' distribution and each position's noise rate within sampling noise
  // (a rate's standard error at 10,000 samples is at most 0.005; the difference of two, 0.007).
  const double density = reference.at("xtrain.noise_density").item<double>();
  const double span = reference.at("xtrain.mean_span_length").item<double>();
  CHECK(density == reference.at("reference.noise_density").item<double>());
  CHECK(span == reference.at("reference.mean_span_length").item<double>());
  const double histogram_gap =
      (reference.at("xtrain.span_lengths") - reference.at("reference.span_lengths")).abs().max().item<double>();
  const double position_gap =
      (reference.at("xtrain.position_rate") - reference.at("reference.position_rate")).abs().max().item<double>();
  CHECK(histogram_gap < 0.02);
  CHECK(position_gap < 0.035);
  CHECK(reference.at("xtrain.position_rate")[0].item<double>() == 0);  // a sample starts with kept tokens
  fmt::print("span corruption over {} samples of {} tokens (64 encoder, {} decoder): noise density {:.5f} and mean "
             "span length {:.4f}, as the reference's; span-length distribution within {:.4f}, each position's noise "
             "rate within {:.4f} of the reference's 10,000 masks\n",
             kSamples, lengths.expanded, lengths.targets, density, span, histogram_gap, position_gap);
  auto row = [](const torch::Tensor& t) {
    const auto c = t.contiguous();
    return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
  };
  fmt::print("example (sample 0): tokens {}\n  noise  {}\n  xtrain    input_ids {}\n  reference input_ids {}\n"
             "  xtrain    labels {}\n  reference labels {}\n",
             row(tokens[0]), row(masks[0]), row(rows[0].narrow(0, 0, 64)),
             row(reference.at("input_ids")[0].to(torch::kInt64)), row(targets[0].narrow(0, 64, lengths.targets)),
             row(reference.at("labels")[0].to(torch::kInt64)));
}
