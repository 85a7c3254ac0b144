// Packing (data.pack): a packed micro batch trains each of its documents as if it were alone.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <numeric>

#include <torch/torch.h>

#include "data/indexed_dataset_writer.h"
#include "data/indexed_token_stream.h"
#include "data/micro_batch.h"
#include "data/token_dataset.h"
#include "memory/memory_policy.h"
#include "model/attention/blockwise_attention.h"
#include "model/causal_lm.h"
#include "model/layers/sequence_layout.h"
#include "model/small_llama.h"
#include "train/training_loss.h"

using namespace xtrain;

namespace {

constexpr int64_t kVocab = 50;

// Documents of skewed lengths (1 to 40 tokens), each ending with EOS (id kVocab - 1).
std::vector<std::vector<int64_t>> skewed_documents(int64_t count, uint64_t seed) {
  torch::manual_seed(seed);
  std::vector<std::vector<int64_t>> documents;
  for (int64_t d = 0; d < count; ++d) {
    const int64_t length = d % 7 == 0 ? 30 + d % 11 : 1 + d % 9;
    auto ids = torch::randint(0, kVocab - 1, {length}, torch::kInt64);
    std::vector<int64_t> tokens(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + length);
    tokens.push_back(kVocab - 1);
    documents.push_back(tokens);
  }
  return documents;
}

std::shared_ptr<data::InMemoryTokenStream> stream_of(const std::vector<std::vector<int64_t>>& documents) {
  auto stream = std::make_shared<data::InMemoryTokenStream>();
  for (const auto& tokens : documents) {
    data::EncodedDocument document;
    document.tokens = tokens;
    stream->append(document);
  }
  return stream;
}

std::shared_ptr<model::CausalLM> small_model(int64_t max_seq_len) {
  testing::SmallLlama shape;
  shape.max_seq_len = max_seq_len;
  torch::manual_seed(7);
  return shape.build(7);
}

// Sum of the next-token losses of one document piece run through the model on its own.
double loss_sum_alone(model::CausalLM& model, const std::vector<int64_t>& inputs,
                      const std::vector<int64_t>& targets) {
  auto logits = testing::logits(model, torch::tensor(inputs, torch::kInt64).unsqueeze(0));
  namespace F = torch::nn::functional;
  return F::cross_entropy(logits.reshape({-1, kVocab}), torch::tensor(targets, torch::kInt64),
                          F::CrossEntropyFuncOptions().ignore_index(data::kIgnoreIndex).reduction(torch::kSum))
      .item<double>();
}

}  // namespace

TEST_CASE("a packed batch's loss is the loss of its documents computed one by one", "[data][pack]") {
  const auto documents = skewed_documents(60, 3);
  const int64_t seq = 48;
  const data::TokenDataset dataset(stream_of(documents), seq, 0, /*shuffle=*/false);
  std::vector<int64_t> stream_ids;  // the stream, and where each document begins
  std::vector<int64_t> starts;
  for (const auto& document : documents) {
    starts.push_back(static_cast<int64_t>(stream_ids.size()));
    stream_ids.insert(stream_ids.end(), document.begin(), document.end());
  }
  auto begins_document = [&](int64_t offset) { return std::binary_search(starts.begin(), starts.end(), offset); };

  const std::vector<int64_t> samples{0, 1, 2, 3};
  for (const auto attention : {memory::Attention::naive, memory::Attention::blockwise}) {
    DYNAMIC_SECTION("attention " << to_string(attention)) {
      auto model = small_model(seq);
      memory::MemoryOptions options;
      options.attention = attention;
      options.attention_block_size = 8;
      memory::apply_memory_policy(*model, options);
      torch::NoGradGuard no_grad;

      const auto batch = data::make_micro_batch(dataset, samples, /*pack=*/true);
      REQUIRE(batch.inputs.sizes() == torch::IntArrayRef({1, 4 * seq}));
      const double packed_mean =
          train::training_loss(*model, train::model_batch(batch.inputs, batch.targets, batch.cu_seqlens, torch::kCPU), 0)
              .loss.item<double>();

      // The reference, from the documents themselves: each window (no shuffle: sample g is
      // stream tokens [g (seq + 1), (g + 1)(seq + 1))) splits into pieces at document starts;
      // a piece predicts its next tokens, except the first token of the next document.
      double reference_sum = 0;
      int64_t reference_count = 0, pieces = 0;
      for (int64_t g : samples) {
        const int64_t window = g * (seq + 1);
        int64_t begin = window;
        for (int64_t p = window + 1; p <= window + seq; ++p) {
          if (p < window + seq && !begins_document(p)) continue;
          std::vector<int64_t> inputs(stream_ids.begin() + begin, stream_ids.begin() + p);
          std::vector<int64_t> targets(stream_ids.begin() + begin + 1, stream_ids.begin() + p + 1);
          if (begins_document(p)) targets.back() = data::kIgnoreIndex;
          reference_sum += loss_sum_alone(*model, inputs, targets);
          for (int64_t target : targets) reference_count += target != data::kIgnoreIndex;
          ++pieces;
          begin = p;
        }
      }
      CHECK(batch.cu_seqlens.numel() == pieces + 1);
      CHECK(batch.target_count == reference_count);
      CHECK(packed_mean == Approx(reference_sum / static_cast<double>(reference_count)).epsilon(1e-5));
      INFO("pieces " << pieces << ", targets " << reference_count);
      CHECK(pieces > 12);  // the skewed documents do split the windows

      // Unpacked, the same tokens attend across documents: a different loss.
      const auto unpacked = data::make_micro_batch(dataset, samples, /*pack=*/false);
      const double unpacked_mean =
          train::training_loss(*model, train::model_batch(unpacked.inputs, unpacked.targets, {}, torch::kCPU), 0)
              .loss.item<double>();
      CHECK(std::abs(unpacked_mean - packed_mean) > 1e-4);  // 7x the tolerance above
    }
  }
}

TEST_CASE("no attention crosses a document boundary in a packed row", "[data][pack]") {
  // 600 tokens: the naive kernel attends segment by segment, the blockwise one tile by tile.
  const int64_t seq = 600;
  const auto cu_seqlens = torch::tensor(std::vector<int64_t>{0, 100, 130, 131, 400, 410, 600}, torch::kInt64);
  const auto layout = model::packed_layout(cu_seqlens);
  torch::manual_seed(11);
  const auto tokens = torch::randint(0, kVocab, {1, seq}, torch::kInt64);
  for (const auto attention : {memory::Attention::naive, memory::Attention::blockwise}) {
    DYNAMIC_SECTION("attention " << to_string(attention)) {
      auto model = small_model(300);
      memory::MemoryOptions options;
      options.attention = attention;
      options.attention_block_size = 64;
      memory::apply_memory_policy(*model, options);
      torch::NoGradGuard no_grad;
      const auto logits = testing::logits(*model, tokens, layout);
      // Document 3 is [131, 400): change its tokens, and only its own logits may change.
      auto changed_tokens = tokens.clone();
      changed_tokens.narrow(1, 131, 269).random_(0, kVocab);
      const auto changed = testing::logits(*model, changed_tokens, layout);
      const auto difference = (changed - logits).abs().amax({0, 2});  // per position
      CHECK(difference.narrow(0, 0, 131).max().item<double>() == 0.0);
      CHECK(difference.narrow(0, 400, 200).max().item<double>() == 0.0);
      CHECK(difference.narrow(0, 131, 269).min().item<double>() > 0.0);
      // A document computes what it computes alone, positions restarting at 0.
      const auto alone = testing::logits(*model, tokens.narrow(1, 410, 190));
      CHECK((alone - logits.narrow(1, 410, 190)).abs().max().item<double>() < 1e-5);
    }
  }
}

TEST_CASE("document starts come from the stream, in memory or from an indexed dataset", "[data][pack]") {
  const auto documents = skewed_documents(30, 5);
  const auto stream = stream_of(documents);
  const std::string prefix = std::filesystem::temp_directory_path() / "xtrain_packing_test";
  {
    data::IndexedDatasetWriter writer(prefix, data::IndexedDType::UInt16);
    for (const auto& document : documents) writer.add_document(document);
    writer.finish();
  }
  const data::IndexedTokenStream indexed(prefix, kVocab);
  for (int64_t begin : {int64_t{0}, int64_t{5}, int64_t{31}, int64_t{100}}) {
    std::vector<int64_t> in_memory, from_file;
    stream->document_starts(begin, 40, in_memory);
    indexed.document_starts(begin, 40, from_file);
    CHECK(in_memory == from_file);
    CHECK_FALSE(in_memory.empty());
    for (int64_t start : in_memory) CHECK((start > begin && start <= begin + 40));
  }
  const data::TokenDataset dataset(stream, 20, 0, false);
  const auto lengths = data::document_piece_lengths(dataset, 3);
  CHECK(std::accumulate(lengths.begin(), lengths.end(), int64_t{0}) == 20);
}

TEST_CASE("naive attention over a long packed row equals the blockwise kernel", "[data][pack]") {
  // Equal documents make runs of equal segments, attended as one batch; irregular ones do not.
  for (const std::vector<int64_t>& bounds :
       {std::vector<int64_t>{0, 128, 256, 384, 512, 640, 768}, std::vector<int64_t>{0, 5, 5, 300, 310, 520, 768},
        std::vector<int64_t>{0, 768}}) {
    torch::manual_seed(13);
    const auto q = torch::randn({2, 4, 768, 16}, torch::kFloat64);
    const auto k = torch::randn({2, 2, 768, 16}, torch::kFloat64);
    const auto v = torch::randn({2, 2, 768, 16}, torch::kFloat64);
    const auto cu = torch::tensor(bounds, torch::kInt64);
    const auto naive = model::causal_attention(q, k, v, cu);
    const auto blockwise = model::blockwise_causal_attention(q, k, v, cu, 64);
    CHECK((naive - blockwise).abs().max().item<double>() < 1e-10);
  }
}
