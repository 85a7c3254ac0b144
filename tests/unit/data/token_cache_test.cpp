#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "data/cache_entry.h"
#include "data/dataset_loader.h"
#include "data/indexed_dataset_writer.h"
#include "data/token_cache.h"
#include "scratch_dir.h"
#include "text/tokenizer.h"
#include "util/file_lock.h"
#include "util/input_error.h"

namespace data = xtrain::data;
namespace fs = std::filesystem;
using xtrain::InputError;
using xtrain::testing::ScratchDir;

namespace {

constexpr const char* kTestKey = "0123456789abcdef";

// A build that writes two documents and counts its calls.
struct CountingBuild {
  std::atomic<int> calls{0};
  int sleep_ms = 0;
  data::TokenCache::Build build() {
    return [this](const std::string& prefix) {
      ++calls;
      std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
      data::IndexedDatasetWriter writer(prefix, data::IndexedDType::UInt16);
      writer.add_document({1, 2, 3});
      writer.add_document({4, 5});
      writer.finish();
      return nlohmann::json{{"documents", 2}, {"tokens", 5}};
    };
  }
};

const nlohmann::json kEntryInfo = {{"sources", {"/data/a.jsonl"}},
                              {"key_inputs", {{"files", {{{"size", 1}, {"mtime_ns", 0}}}}}}};

void flip_cache_byte(const std::string& path, long offset) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekg(offset);
  const char byte = static_cast<char>(file.get());
  file.seekp(offset);
  file.put(static_cast<char>(byte ^ 0x01));
}

void set_entry_mtime(const std::string& path, int64_t seconds) {
  const struct timespec times[2] = {{seconds, 0}, {seconds, 0}};
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
}

}  // namespace

TEST_CASE("token cache: an entry is built once, committed whole, and reused", "[data][data_cache]") {
  ScratchDir dir;
  const data::TokenCache cache((dir.path() / "cache").string());
  CountingBuild counting;
  const auto first = cache.open(kTestKey, kEntryInfo, counting.build());
  CHECK(first.how == data::TokenCache::Opened::How::built);
  CHECK(first.prefix == cache.entry_dir(kTestKey) + "/tokens");
  CHECK_FALSE(data::check_entry(first.dir, kTestKey).has_value());
  const auto second = cache.open(kTestKey, kEntryInfo, counting.build());
  CHECK(second.how == data::TokenCache::Opened::How::reused);
  CHECK_FALSE(second.waited);
  CHECK(counting.calls == 1);
  // Only the entry and its lock file: no temporary folder is left.
  std::vector<std::string> names;
  for (const auto& item : fs::directory_iterator(cache.dir())) names.push_back(item.path().filename());
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{kTestKey, std::string(kTestKey) + ".lock"});
}

TEST_CASE("token cache: concurrent openers build one entry; the others wait and reuse it", "[data][data_cache]") {
  ScratchDir dir;
  const data::TokenCache cache((dir.path() / "cache").string());
  CountingBuild counting;
  counting.sleep_ms = 300;
  std::vector<data::TokenCache::Opened> opened(4);
  std::vector<std::thread> openers;
  for (size_t i = 0; i < opened.size(); ++i)
    openers.emplace_back([&, i] { opened[i] = cache.open(kTestKey, kEntryInfo, counting.build()); });
  for (auto& opener : openers) opener.join();
  CHECK(counting.calls == 1);
  int built = 0, waited = 0;
  for (const auto& result : opened) {
    built += result.how == data::TokenCache::Opened::How::built;
    waited += result.waited;
  }
  CHECK(built == 1);
  CHECK(waited == 3);
}

TEST_CASE("token cache: a damaged entry is found by checksum and rebuilt", "[data][data_cache]") {
  ScratchDir dir;
  const data::TokenCache cache((dir.path() / "cache").string());
  CountingBuild counting;
  const auto built = cache.open(kTestKey, kEntryInfo, counting.build());
  std::string expected_problem;
  SECTION("a flipped byte in the token shard") {
    flip_cache_byte(built.prefix + ".bin", 2);
    expected_problem = "tokens.bin: checksum mismatch";
  }
  SECTION("a truncated index") {
    fs::resize_file(built.prefix + ".idx", 10);
    expected_problem = "tokens.idx: 10 bytes, the manifest says";
  }
  SECTION("a missing shard") {
    fs::remove(built.prefix + ".bin");
    expected_problem = "tokens.bin: missing";
  }
  SECTION("an edited manifest") {
    auto manifest = data::read_entry_manifest(built.dir);
    manifest["tokens"] = 6;
    std::ofstream(fs::path(built.dir) / data::kEntryManifest) << manifest.dump();
    expected_problem = "entry.json: its own checksum does not match";
  }
  SECTION("a file that is not listed") {
    std::ofstream(fs::path(built.dir) / "extra.bin") << "x";
    expected_problem = "extra.bin: not in the manifest";
  }
  const auto problem = data::check_entry(built.dir, kTestKey);
  REQUIRE(problem.has_value());
  CHECK_THAT(*problem, Catch::Contains(expected_problem));
  const auto rebuilt = cache.open(kTestKey, kEntryInfo, counting.build());
  CHECK(rebuilt.how == data::TokenCache::Opened::How::built);
  CHECK_THAT(rebuilt.repaired, Catch::Contains(expected_problem));
  CHECK(counting.calls == 2);
  CHECK_FALSE(data::check_entry(rebuilt.dir, kTestKey).has_value());
}

TEST_CASE("token cache: a failed build leaves nothing; a dead builder's leftovers are removed", "[data][data_cache]") {
  ScratchDir dir;
  const data::TokenCache cache((dir.path() / "cache").string());
  const auto failing = [](const std::string& prefix) -> nlohmann::json {
    data::IndexedDatasetWriter writer(prefix, data::IndexedDType::UInt16);
    writer.add_document({1});
    throw InputError("bad record");
  };
  CHECK_THROWS_WITH(cache.open(kTestKey, kEntryInfo, failing), "bad record");
  CHECK_FALSE(fs::exists(cache.entry_dir(kTestKey)));
  const std::string leftover = cache.dir() + "/.build-" + kTestKey + "-99999";
  fs::create_directories(leftover);
  std::ofstream(leftover + "/tokens.bin") << "partial";
  CountingBuild counting;
  cache.open(kTestKey, kEntryInfo, counting.build());
  CHECK_FALSE(fs::exists(leftover));
  CHECK(counting.calls == 1);
}

TEST_CASE("token cache: gc removes leftovers, then entries least recently used first", "[data][data_cache]") {
  ScratchDir dir;
  const data::TokenCache cache((dir.path() / "cache").string());
  CountingBuild counting;
  const std::vector<std::string> keys = {"000000000000000a", "000000000000000b", "000000000000000c"};
  for (size_t i = 0; i < keys.size(); ++i) {
    cache.open(keys[i], kEntryInfo, counting.build());
    set_entry_mtime(cache.entry_dir(keys[i]), 1000 + static_cast<int64_t>(i));
  }
  set_entry_mtime(cache.entry_dir(keys[0]), 5000);  // used last
  const auto entries = cache.entries(/*checksums=*/true);
  REQUIRE(entries.size() == 3);
  CHECK(entries[0].key == keys[1]);
  CHECK(entries[0].state == "stale");  // its source, /data/a.jsonl, is gone
  const uint64_t entry_bytes = entries[0].bytes;
  fs::create_directories(cache.dir() + "/.build-" + keys[1] + "-99999");
  fs::create_directories(cache.dir() + "/.build-" + keys[2] + "-99999");

  // keys[1], the oldest, is held by a builder: it and its leftover are skipped.
  const auto lock = xtrain::util::FileLock::acquire(cache.dir() + "/" + keys[1] + ".lock");
  const auto collected = cache.collect(2 * entry_bytes);
  CHECK(collected.removed ==
        std::vector<std::string>{cache.dir() + "/.build-" + keys[2] + "-99999", cache.entry_dir(keys[2])});
  CHECK(collected.busy == std::vector<std::string>{cache.entry_dir(keys[1])});
  CHECK(fs::exists(cache.dir() + "/.build-" + keys[1] + "-99999"));
  CHECK(fs::exists(cache.entry_dir(keys[0])));

  const auto all = cache.collect(0);
  CHECK(all.kept_bytes == entry_bytes);  // only the locked entry is left
}

TEST_CASE("token cache: only a folder whose entry.json names its key is an entry; others are left alone",
          "[data][data_cache]") {
  ScratchDir dir;
  const data::TokenCache cache((dir.path() / "cache").string());
  CountingBuild counting;
  cache.open(kTestKey, kEntryInfo, counting.build());
  const std::string foreign = cache.dir() + "/fedcba9876543210";  // a user's folder, no entry.json
  fs::create_directories(foreign);
  std::ofstream(foreign + "/photo.jpg") << "x";
  const std::string other_manifest = cache.dir() + "/00000000000000ff";  // entry.json of another key
  fs::create_directories(other_manifest);
  fs::copy_file(cache.entry_dir(kTestKey) + "/entry.json", other_manifest + "/entry.json");
  fs::create_directories(cache.dir() + "/.build-notakey-1");
  CHECK(cache.holds_cache_items());
  CHECK(cache.foreign() == std::vector<std::string>{cache.dir() + "/.build-notakey-1",
                                                    other_manifest, foreign});
  const auto entries = cache.entries(/*checksums=*/true);
  REQUIRE(entries.size() == 1);
  CHECK(entries[0].key == kTestKey);
  const auto collected = cache.collect(0);
  CHECK(collected.removed == std::vector<std::string>{cache.entry_dir(kTestKey)});
  CHECK(fs::exists(foreign + "/photo.jpg"));
  CHECK(fs::exists(other_manifest + "/entry.json"));
  CHECK(fs::exists(cache.dir() + "/.build-notakey-1"));
  // A run that needs the key of a foreign folder refuses rather than remove it.
  const std::string squatted = cache.dir() + "/" + kTestKey;
  fs::create_directories(squatted);
  std::ofstream(squatted + "/mine.txt") << "x";
  CHECK_THROWS_WITH(cache.open(kTestKey, kEntryInfo, counting.build()),
                    Catch::Contains(squatted + " is not a cache entry"));
  CHECK(fs::exists(squatted + "/mine.txt"));
}

TEST_CASE("token cache: read_only opens a folder without writing to it, and never makes one", "[data][data_cache]") {
  ScratchDir dir;
  CHECK_THROWS_WITH(data::TokenCache((dir.path() / "missing").string(), data::TokenCache::Access::read_only),
                    Catch::Contains("no such folder"));
  CHECK_FALSE(fs::exists(dir.path() / "missing"));
  fs::create_directories(dir.path() / "empty");
  const data::TokenCache cache((dir.path() / "empty").string(), data::TokenCache::Access::read_only);
  CHECK(cache.entries(/*checksums=*/true).empty());
  CHECK_FALSE(cache.holds_cache_items());
  CHECK(cache.foreign().empty());
}

TEST_CASE("token cache: a folder that cannot be made is an input error naming it", "[data][data_cache]") {
  ScratchDir dir;
  const std::string file = dir.write("plain", "x");
  CHECK_THROWS_WITH(data::TokenCache(file + "/cache"), Catch::Contains(file + "/cache") && Catch::Contains("data.cache_dir"));
}

TEST_CASE("token cache: sizes", "[data][data_cache]") {
  CHECK(data::parse_byte_size("0") == 0);
  CHECK(data::parse_byte_size("512") == 512);
  CHECK(data::parse_byte_size("10K") == 10240);
  CHECK(data::parse_byte_size("1.5G") == 1610612736);
  CHECK(data::parse_byte_size("2MB") == 2097152);
  CHECK_THROWS_AS(data::parse_byte_size("ten"), InputError);
  CHECK_THROWS_AS(data::parse_byte_size("10X"), InputError);
  CHECK_THROWS_AS(data::parse_byte_size("-1"), InputError);
  CHECK(data::format_bytes(1536) == "1.5 KiB");
}

TEST_CASE("token cache: a source read through the cache is the stream tokenized in memory", "[data][data_cache]") {
  ScratchDir dir;
  const std::string source = dir.write(
      "mixed.jsonl",
      "{\"text\": \"plain text first\"}\n"
      "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"hello\"}]}\n"
      "{\"text\": \"and more text after it\"}\n");
  const auto tokenizer = xtrain::text::make_tokenizer("byte");
  data::DatasetOptions options;
  options.seq_len = 8;
  const auto memory = data::load_token_stream(source, *tokenizer, options);
  options.cache_dir = (dir.path() / "cache").string();
  options.tokenizer_spec = "byte";
  const auto cold = data::load_token_stream(source, *tokenizer, options);
  const auto warm = data::load_token_stream(source, *tokenizer, options);
  for (const auto& cached : {cold, warm}) {
    REQUIRE(cached->size() == memory->size());
    REQUIRE(cached->has_loss_mask());
    std::vector<int64_t> expected(static_cast<size_t>(memory->size())), actual(expected.size());
    memory->read(0, memory->size(), expected.data());
    cached->read(0, cached->size(), actual.data());
    CHECK(actual == expected);
    std::vector<uint8_t> expected_mask(expected.size()), actual_mask(expected.size());
    memory->read_loss_mask(0, memory->size(), expected_mask.data());
    cached->read_loss_mask(0, cached->size(), actual_mask.data());
    CHECK(actual_mask == expected_mask);
    std::vector<int64_t> expected_starts, actual_starts;
    memory->document_starts(0, memory->size() - 1, expected_starts);
    cached->document_starts(0, cached->size() - 1, actual_starts);
    CHECK(actual_starts == expected_starts);
  }
  size_t entries = 0;
  for (const auto& item : fs::directory_iterator(options.cache_dir)) entries += item.is_directory();
  CHECK(entries == 1);
}
