#include <chrono>
#include <random>
#include <thread>

#include "data/blended_dataset.h"
#include "data/data_prepare.h"
#include "data/dataset_loader.h"
#include "data/sources/indexed_dataset.h"
#include "data/indexed_token_stream.h"
#include "data/sources/source_list.h"
#include "data/sources/text_source.h"
#include "scratch_dir.h"
#include "util/input_error.h"
#include "util/ordered_parallel_map.h"

// Catch after torch: c10 defines a CHECK macro of its own.
#include <catch2/catch.hpp>

using namespace xtrain::data;
using xtrain::InputError;
using xtrain::testing::ScratchDir;

namespace {

std::vector<int64_t> to_vector(const torch::Tensor& t) {
  const torch::Tensor c = t.contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

std::vector<int64_t> stream_ids(const TokenStream& stream) {
  std::vector<int64_t> ids(static_cast<size_t>(stream.size()));
  stream.read(0, stream.size(), ids.data());
  return ids;
}

std::vector<uint8_t> stream_mask(const TokenStream& stream) {
  std::vector<uint8_t> mask(static_cast<size_t>(stream.size()));
  stream.read_loss_mask(0, stream.size(), mask.data());
  return mask;
}

DatasetOptions options(int64_t seq_len, bool shuffle = false) {
  DatasetOptions o;
  o.seq_len = seq_len;
  o.seed = 7;
  o.shuffle = shuffle;
  o.workers = 2;
  return o;
}

const char* const kChat =
    "{\"messages\": [{\"role\": \"user\", \"content\": \"ab\"}, {\"role\": \"assistant\", \"content\": \"cd\"}]}\n";
const char* const kChatTemplate = "user=U{content};assistant=A{content}.\\n";

}  // namespace

TEST_CASE("sources: a JSONL file mixing text and conversations has a loss mask on the conversations", "[data]") {
  ScratchDir dir;
  const std::string path = dir.write("mixed.jsonl", std::string("{\"text\": \"xy\"}\n") + kChat);
  const auto tokenizer = xtrain::text::make_tokenizer("byte");
  DatasetOptions o = options(4);
  o.chat_template = kChatTemplate;
  const auto stream = load_token_stream(path, *tokenizer, o);
  // x y <eos> | U a b A c d . \n <eos>: the loss on "cd." only.
  CHECK(stream_ids(*stream) == std::vector<int64_t>{'x', 'y', 256, 'U', 'a', 'b', 'A', 'c', 'd', '.', '\n', 256});
  CHECK(stream_mask(*stream) == std::vector<uint8_t>{1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 0, 0});

  // Targets are the next tokens, -100 where the next token carries no loss.
  const auto dataset = load_dataset(path, *tokenizer, o);
  REQUIRE(dataset->has_loss_mask());
  REQUIRE(dataset->num_samples() == 2);
  CHECK(to_vector(dataset->batch(0, 2)) == std::vector<int64_t>{'x', 'y', 256, 'U', 'a', 'b', 'A', 'c', 'd', '.'});
  CHECK(to_vector(dataset->targets(0, 2)) == std::vector<int64_t>{'y', 256, -100, -100, -100, 'c', 'd', '.'});
}

TEST_CASE("sources: errors in chat records name the file and line", "[data]") {
  ScratchDir dir;
  const auto tokenizer = xtrain::text::make_tokenizer("byte");
  auto problem = [&](const std::string& contents, const std::string& chat_template = "chatml") -> std::string {
    const std::string path = dir.write("chat.jsonl", contents);
    DatasetOptions o = options(2);
    o.chat_template = chat_template;
    try {
      load_token_stream(path, *tokenizer, o);
    } catch (const InputError& e) {
      return std::string(e.what()).substr(path.size());
    }
    return "no error";
  };
  CHECK(problem(std::string(kChat) + "{\"messages\": []}\n") ==
        ":2: \"messages\" must be a non-empty list of {\"role\": ..., \"content\": ...}");
  CHECK(problem("\n{\"messages\": [{\"role\": \"user\"}]}\n") == ":2: message 1: missing string field \"content\"");
  CHECK(problem("{\"messages\": [{\"role\": \"tool\", \"content\": \"x\"}]}\n", "user={content}") ==
        ":1: role 'tool' has no entry in the chat template (it has: user); add tool=PREFIX{content}SUFFIX or *=... "
        "to data.chat_template");
  CHECK(problem("{\"body\": 1}\n") == ":1: missing string field \"text\" (or a \"messages\" list for a conversation)");
}

TEST_CASE("sources: megatron:PREFIX reads what data prepare wrote, the same stream as the files", "[data]") {
  ScratchDir dir;
  const std::string text = dir.write("a.jsonl", "{\"text\": \"hello\"}\n{\"text\": \"world!\"}\n");
  const std::string chat = dir.write("chat.jsonl", std::string(kChat) + kChat);
  const auto tokenizer = xtrain::text::make_tokenizer("byte");
  DatasetOptions o = options(3);
  o.chat_template = kChatTemplate;
  for (const auto& input : {text, chat}) {
    INFO(input);
    PrepareOptions prepare;
    prepare.tokenizer = "byte";
    prepare.inputs = {input};
    prepare.output_prefix = (dir.path() / "out" / "prepared").string();
    prepare.workers = 2;
    prepare.chat_template = kChatTemplate;
    const PrepareResult result = prepare_indexed_dataset(prepare, nullptr);
    CHECK(result.documents == 2);
    CHECK(result.dtype == IndexedDType::UInt16);
    CHECK(result.loss_mask == (input == chat));

    const auto direct = load_token_stream(input, *tokenizer, o);
    const auto mapped = load_token_stream("megatron:" + prepare.output_prefix, *tokenizer, o);
    CHECK(result.tokens == direct->size());
    CHECK(stream_ids(*mapped) == stream_ids(*direct));
    CHECK(mapped->has_loss_mask() == direct->has_loss_mask());
    CHECK(stream_mask(*mapped) == stream_mask(*direct));
  }
  // Ids the tokenizer cannot have produced: the data was written with another tokenizer.
  CHECK_THROWS_WITH(IndexedTokenStream((dir.path() / "out" / "prepared").string(), 100),
                    Catch::Contains("has id 100, outside the tokenizer's 100 ids; the data was written with another tokenizer"));
  CHECK_THAT(check_source("megatron:" + (dir.path() / "nothing").string()).value_or(""),
             Catch::StartsWith("file not found: " + (dir.path() / "nothing.idx").string()));
  CHECK_THAT(check_source((dir.path() / "out" / "prepared.bin").string()).value_or(""),
             Catch::Contains("is one file of a Megatron indexed dataset: write megatron:"));
}

TEST_CASE("source lists: parse, encode and reject malformed lists", "[data]") {
  const auto sources = parse_source_list("[{path: 'megatron:/d/web', weight: 0.7}, {path: chat.jsonl, weight: 0.3}, b.txt]");
  REQUIRE(sources.size() == 3);
  CHECK(sources[0].path == "megatron:/d/web");
  CHECK(sources[1].weight == 0.3);
  CHECK(sources[2].weight == 1.0);
  const std::string encoded = encode_source_list(sources);
  CHECK(encoded == "[{path: megatron:/d/web, weight: 0.7}, {path: chat.jsonl, weight: 0.3}, {path: b.txt, weight: 1}]");
  CHECK(encode_source_list({{"a, b]", 1.0}}) == "[{path: \"a, b]\", weight: 1}]");
  CHECK(parse_source_list(encode_source_list({{"a, b]", 2.5}})).at(0).path == "a, b]");
  CHECK(parse_source_list(encoded).size() == 3);
  CHECK(parse_source_list("builtin:demo").at(0).path == "builtin:demo");
  CHECK_THROWS_WITH(parse_source_list("[{path: a, wieght: 1}]"), Catch::StartsWith("source 1: unknown key 'wieght'"));
  CHECK_THROWS_WITH(parse_source_list("[{path: a}, {path: b, weight: 0}]"),
                    Catch::StartsWith("source 2: weight must be a positive number, got '0'"));
  CHECK_THROWS_WITH(parse_source_list("[{weight: 1}]"), Catch::StartsWith("source 1: missing path"));
  CHECK_THROWS_WITH(parse_source_list("[]"), Catch::StartsWith("empty source list"));
}

TEST_CASE("blend: samples follow the weights in Megatron's greedy order, as a pure function of the index",
          "[data]") {
  ScratchDir dir;
  const auto tokenizer = xtrain::text::make_tokenizer("byte");
  const std::string a = dir.write("a.txt", std::string(40, 'a'));  // 41 tokens: 10 samples of 4
  const std::string b = dir.write("b.txt", std::string(20, 'b'));  // 21 tokens: 5 samples
  const std::string spec = encode_source_list({{a, 3.0}, {b, 1.0}});
  const auto dataset = load_dataset(spec, *tokenizer, options(3, /*shuffle=*/true));
  const auto& blend = dynamic_cast<const BlendedDataset&>(*dataset);
  CHECK(blend.num_samples() == 15);
  CHECK(blend.weights() == std::vector<double>{0.75, 0.25});
  // Megatron's greedy (build_blending_indices in megatron/core/datasets/helpers.cpp,
  // NVIDIA/Megatron-LM at 298c71d): each sample to the source furthest below its share, with
  // position 0 counted as 1.
  std::string order;
  for (int64_t g = 0; g < 8; ++g) order += blend.locate(g).first == 0 ? 'a' : 'b';
  CHECK(order == "abaaabaa");
  int64_t from_a = 0;
  const int64_t n = 3 * BlendedDataset::kCycle + 123;
  for (int64_t g = 0; g < n; ++g) from_a += blend.locate(g).first == 0;
  CHECK(std::abs(static_cast<double>(from_a) / n - 0.75) < 1e-4);
  // The k-th sample taken from a source is its sample k, across cycles too.
  CHECK(blend.locate(BlendedDataset::kCycle) == std::pair<size_t, int64_t>{0, 3 * BlendedDataset::kCycle / 4});
  const auto batch = to_vector(dataset->batch(0, 8));
  for (int64_t i = 0; i < 8; ++i) CHECK(batch[static_cast<size_t>(i * 4)] == (order[static_cast<size_t>(i)] == 'a' ? 'a' : 'b'));
  CHECK(to_vector(dataset->batch(5000, 16)) == to_vector(load_dataset(spec, *tokenizer, options(3, true))->batch(5000, 16)));
  CHECK(dataset->unigram_entropy() > 0);

  // Megatron's rule gives the second source a sample at position 1 whatever its weight, but a
  // third as light never gets one in a cycle.
  CHECK(load_dataset(encode_source_list({{a, 1e6}, {b, 1.0}}), *tokenizer, options(3))->num_samples() == 15);
  CHECK_THROWS_WITH(load_dataset(encode_source_list({{a, 1e6}, {b, 1.0}, {b, 1.0}}), *tokenizer, options(3)),
                    Catch::Contains("blend source 3 has weight 1e-06 of the total, too little to be sampled"));
  CHECK_THROWS_WITH(load_dataset(encode_source_list({{a, 1.0}, {"missing.txt", 1.0}}), *tokenizer, options(3)),
                    "source 2 (missing.txt): file not found: missing.txt");
}

TEST_CASE("ordered_parallel_map: results in input order whatever the timing; the first error in order wins",
          "[data][util]") {
  for (int workers : {1, 2, 5}) {
    int next_item = 0;
    std::vector<int> consumed;
    xtrain::util::ordered_parallel_map<int, int>(
        workers, 7,
        [&]() -> std::optional<int> {
          if (next_item == 200) return std::nullopt;
          return next_item++;
        },
        [](int item) {
          std::this_thread::sleep_for(std::chrono::microseconds((item * 7919) % 300));
          return item * item;
        },
        [&](int result) { consumed.push_back(result); });
    REQUIRE(consumed.size() == 200);
    for (int i = 0; i < 200; ++i) CHECK(consumed[static_cast<size_t>(i)] == i * i);
  }
  int next_item = 0;
  std::vector<int> consumed;
  auto run_failing = [&] {
    xtrain::util::ordered_parallel_map<int, int>(
        4, 16,
        [&]() -> std::optional<int> {
          if (next_item == 100) return std::nullopt;
          return next_item++;
        },
        [](int item) {
          // Item 60 fails at once, item 30 only after a while: 30 is still the one reported.
          if (item == 30) std::this_thread::sleep_for(std::chrono::milliseconds(20));
          if (item == 30 || item == 60) throw std::runtime_error("item " + std::to_string(item));
          return item;
        },
        [&](int result) { consumed.push_back(result); });
  };
  CHECK_THROWS_WITH(run_failing(), "item 30");
  CHECK(consumed.size() == 30);
}
