#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "data/cache_key.h"
#include "scratch_dir.h"
#include "text/tokenizer.h"
#include "util/input_error.h"

namespace data = xtrain::data;
using xtrain::testing::ScratchDir;

namespace {

// Sets a file's modification time, so that tests do not depend on the clock's resolution.
void set_source_mtime(const std::string& path, int64_t seconds) {
  const struct timespec times[2] = {{seconds, 0}, {seconds, 0}};
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
}

data::CacheKeyInputs key_inputs_of(const std::string& source, const std::string& tokenizer_spec = "byte") {
  const auto tokenizer = xtrain::text::make_tokenizer(tokenizer_spec);
  data::CacheKeyInputs inputs;
  inputs.files = data::fingerprint_source(source);
  inputs.tokenizer = data::tokenizer_fingerprint(tokenizer_spec, *tokenizer);
  inputs.chat_template = "chatml";
  inputs.objective = "clm";
  inputs.seq_len = 64;
  return inputs;
}

}  // namespace

TEST_CASE("cache key: the same source and settings give the same key", "[data][data_cache]") {
  ScratchDir dir;
  const std::string file = dir.write("a.jsonl", "{\"text\": \"one\"}\n");
  set_source_mtime(file, 1000);
  const auto inputs = key_inputs_of(file);
  CHECK(data::cache_key(inputs) == data::cache_key(key_inputs_of(file)));
  CHECK(data::cache_key(inputs).size() == 16);
  REQUIRE(inputs.files.size() == 1);
  CHECK(inputs.files[0].kind == "jsonl");
  CHECK(inputs.files[0].size == 16);
  CHECK(inputs.files[0].mtime_ns == int64_t{1000} * 1000000000);
  CHECK(inputs.files[0].path == std::filesystem::absolute(file).string());
}

TEST_CASE("cache key: content, size, mtime and every setting change the key", "[data][data_cache]") {
  ScratchDir dir;
  const std::string file = dir.write("a.txt", "abc");
  set_source_mtime(file, 1000);
  const std::string base = data::cache_key(key_inputs_of(file));

  SECTION("a changed byte of the same size, at the same mtime") {
    std::ofstream(file, std::ios::binary) << "abd";
    set_source_mtime(file, 1000);
    CHECK(data::cache_key(key_inputs_of(file)) != base);
  }
  SECTION("an appended line") {
    std::ofstream(file, std::ios::binary | std::ios::app) << "\nmore";
    set_source_mtime(file, 1000);
    CHECK(data::cache_key(key_inputs_of(file)) != base);
  }
  SECTION("a touched file") {
    set_source_mtime(file, 2000);
    CHECK(data::cache_key(key_inputs_of(file)) != base);
  }
  SECTION("the settings") {
    auto inputs = key_inputs_of(file);
    inputs.chat_template = "llama3";
    CHECK(data::cache_key(inputs) != base);
    inputs = key_inputs_of(file);
    inputs.objective = "mlm";
    CHECK(data::cache_key(inputs) != base);
    inputs = key_inputs_of(file);
    inputs.seq_len = 65;
    CHECK(data::cache_key(inputs) != base);
    inputs = key_inputs_of(file);
    inputs.tokenizer += "x";
    CHECK(data::cache_key(inputs) != base);
  }
}

TEST_CASE("cache key: the path is not part of the key, the content is", "[data][data_cache]") {
  ScratchDir dir;
  const std::string first = dir.write("a.txt", "same text");
  const std::string second = dir.write("b/a.txt", "same text");
  set_source_mtime(first, 1000);
  set_source_mtime(second, 1000);
  CHECK(data::cache_key(key_inputs_of(first)) == data::cache_key(key_inputs_of(second)));
}

TEST_CASE("cache key: a folder's files in name order, and a missing source named", "[data][data_cache]") {
  ScratchDir dir;
  dir.write("docs/b.txt", "bee");
  dir.write("docs/a.txt", "ay");
  const auto files = data::fingerprint_source((dir.path() / "docs").string());
  REQUIRE(files.size() == 2);
  CHECK(std::filesystem::path(files[0].path).filename() == "a.txt");
  CHECK(files[0].kind == "text");
  CHECK(files[1].size == 3);
  CHECK_THROWS_WITH(data::fingerprint_source((dir.path() / "gone.jsonl").string()), Catch::Contains("gone.jsonl"));
  CHECK(data::is_cacheable_source((dir.path() / "docs").string()));
  CHECK_FALSE(data::is_cacheable_source("builtin:demo"));
  CHECK_FALSE(data::is_cacheable_source("megatron:/data/web"));
}

TEST_CASE("cache key: the tokenizer's fingerprint follows its files' content, not their path", "[data][data_cache]") {
  const auto byte = xtrain::text::make_tokenizer("byte");
  CHECK(data::tokenizer_fingerprint("byte", *byte) == "byte:vocab=257:eos=256");
  // The fingerprint reads the spec's files; the tokenizer object gives the vocabulary and EOS.
  ScratchDir dir;
  const std::string first = dir.write("one/tokenizer.json", "{\"model\": 1}");
  const std::string second = dir.write("two/tokenizer.json", "{\"model\": 1}");
  CHECK(data::tokenizer_fingerprint("hf:" + first, *byte) == data::tokenizer_fingerprint("hf:" + second, *byte));
  CHECK(data::tokenizer_fingerprint("hf:" + first, *byte) ==
        data::tokenizer_fingerprint("hf:" + (dir.path() / "one").string(), *byte));
  dir.write("two/tokenizer_config.json", "{}");
  CHECK(data::tokenizer_fingerprint("hf:" + first, *byte) != data::tokenizer_fingerprint("hf:" + second, *byte));
  const std::string ranks = dir.write("r.tiktoken", "IQ== 0\n");
  CHECK(data::tokenizer_fingerprint("tiktoken:" + ranks + ":r50k_base", *byte) !=
        data::tokenizer_fingerprint("tiktoken:" + ranks + ":cl100k_base", *byte));
  std::ofstream(ranks, std::ios::app) << "Ig== 1\n";
  CHECK(data::tokenizer_fingerprint("tiktoken:" + ranks, *byte).find("tiktoken:") == 0);
}
