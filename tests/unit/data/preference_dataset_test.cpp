#include <torch/torch.h>

#include "data/micro_batch.h"
#include "data/preference_dataset.h"
#include "text/byte_tokenizer.h"
#include "train/dpo_loss.h"
#include "util/input_error.h"

// Catch after torch: c10 defines a CHECK macro of its own.
#include <catch2/catch.hpp>
#include "scratch_dir.h"

using namespace xtrain;

namespace {
torch::Tensor preference_ids(std::vector<int64_t> values) { return torch::tensor(values, torch::kInt64); }
}  // namespace

TEST_CASE("preference rows: the completion's tokens are the targets, pairs stay whole", "[data][dpo]") {
  testing::ScratchDir dir;
  const auto file = dir.write("prefs.jsonl", "{\"prompt\": \"ab\", \"chosen\": \"c\", \"rejected\": \"defgh\"}\n");
  const text::ByteTokenizer bytes;
  data::PreferenceDataset dataset(data::read_preference_pairs(file, bytes, 6), 6, bytes.eos_id(), 1, false);
  REQUIRE(dataset.num_samples() == 2);
  const int64_t eos = bytes.eos_id();
  // Chosen: a b c EOS, padded; targets at the positions predicting c and EOS.
  CHECK(dataset.batch(0, 1)[0].equal(preference_ids({'a', 'b', 'c', eos, eos, eos, eos})));
  CHECK(dataset.targets(0, 1)[0].equal(preference_ids({-100, 'c', eos, -100, -100, -100})));
  // Rejected: d e f g h EOS cut to the row's 7 tokens (keep_start).
  CHECK(dataset.targets(1, 1)[0].equal(preference_ids({-100, 'd', 'e', 'f', 'g', 'h'})));
  CHECK(data::make_micro_batch(dataset, {0, 1, 2, 3}, false).target_count == 2);  // pairs
}

TEST_CASE("preference rows: conversational records are the chat template's prompt and the rest", "[data][dpo]") {
  testing::ScratchDir dir;
  const auto file = dir.write(
      "chat.jsonl",
      "{\"prompt\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"chosen\": [{\"role\": \"assistant\", "
      "\"content\": \"Yo\"}], \"rejected\": [{\"role\": \"assistant\", \"content\": \"No\"}]}\n");
  const text::ByteTokenizer bytes;
  const auto pairs = data::read_preference_pairs(file, bytes, 64, "chatml");
  REQUIRE(pairs.size() == 1);
  CHECK(bytes.decode(pairs[0].prompt) == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  CHECK(bytes.decode(pairs[0].chosen) == "Yo<|im_end|>\n");  // the end-of-turn marker, no EOS
  CHECK(bytes.decode(pairs[0].rejected) == "No<|im_end|>\n");
}

TEST_CASE("preference rows: bad records name the file and line", "[data][dpo]") {
  testing::ScratchDir dir;
  const text::ByteTokenizer bytes;
  auto refused = [&](const std::string& record) {
    const auto file = dir.write("bad.jsonl", "{\"prompt\": \"a\", \"chosen\": \"b\", \"rejected\": \"c\"}\n" + record);
    try {
      data::read_preference_pairs(file, bytes, 8);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK_THAT(refused("{\"prompt\": \"a\", \"rejected\": \"c\"}"),
             Catch::Contains("bad.jsonl:2: the record has no \"chosen\""));
  CHECK_THAT(refused("{\"prompt\": \"a\", \"chosen\": \"\", \"rejected\": \"c\"}"),
             Catch::Contains("bad.jsonl:2: \"chosen\" is empty"));
  CHECK_THAT(refused("{\"prompt\": \"abcdefgh\", \"chosen\": \"b\", \"rejected\": \"c\"}"),
             Catch::Contains("bad.jsonl:2: the prompt is 8 tokens, and data.seq_len 8 leaves no room"));
}

TEST_CASE("dpo losses: sigmoid with label smoothing and ipo's per-token ratios", "[train][dpo]") {
  const auto policy = torch::tensor({-3.0, -5.0, -2.0, -2.5}, torch::kFloat64);
  const auto reference = torch::tensor({-4.0, -4.5, -2.0, -2.0}, torch::kFloat64);
  const auto tokens = torch::tensor({2, 4, 1, 5});
  train::DpoSettings settings{config::DpoLoss::sigmoid, 0.5, 0.2};
  // deltas: (1 - -0.5) = 1.5 and (0 - -0.5) = 0.5
  auto log_sigmoid = [](double x) { return -std::log1p(std::exp(-x)); };
  const double sigmoid = (-(0.8 * log_sigmoid(0.75) + 0.2 * log_sigmoid(-0.75)) -
                          (0.8 * log_sigmoid(0.25) + 0.2 * log_sigmoid(-0.25))) / 2;
  CHECK(train::dpo_terms(policy, reference, tokens, settings).loss.item<double>() == Approx(sigmoid).epsilon(1e-12));
  settings = {config::DpoLoss::ipo, 0.5, 0};
  const double ipo = (std::pow(1.0 / 2 + 0.5 / 4 - 1, 2) + std::pow(0.0 / 1 + 0.5 / 5 - 1, 2)) / 2;
  const auto terms = train::dpo_terms(policy, reference, tokens, settings);
  CHECK(terms.loss.item<double>() == Approx(ipo).epsilon(1e-12));
  CHECK(terms.metrics[2].first == "rewards/accuracies");
  CHECK(terms.metrics[2].second.item<double>() == 1.0);
}
