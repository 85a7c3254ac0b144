// What every fuzz target shares. The parsers read files, as the engine does, so each input is
// written to a file in a scratch folder of this process's own first. Bad input may only ever be
// an InputError (the command line's exit code 2): any other exception escapes the target, and
// libFuzzer reports it as a crash with the input that caused it; so does a broken invariant
// (require).
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "text/tokenizer.h"
#include "util/input_error.h"

namespace xtrain::fuzz {

// TMPDIR/xtrain-fuzz-PID, made on first use and removed when the process exits normally. The
// string is never destroyed, so that the exit handler can still read it.
inline const std::string& scratch_dir() {
  static const std::string* dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    auto* path = new std::string(std::string(tmp && *tmp ? tmp : "/tmp") + "/xtrain-fuzz-" +
                                 std::to_string(::getpid()));
    std::filesystem::create_directories(*path);
    std::atexit([] { std::filesystem::remove_all(scratch_dir()); });
    return path;
  }();
  return *dir;
}

inline std::string write_input(const std::string& name, std::string_view bytes) {
  const std::string path = scratch_dir() + "/" + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size());
  return path;
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// A broken invariant: reported as a crash, with the input.
inline void require(bool holds, const char* what) {
  if (!holds) {
    std::fprintf(stderr, "invariant broken: %s\n", what);
    std::abort();
  }
}

// Runs parse; an InputError is the expected answer to bad input.
template <class Parse>
void expect_only_input_errors(Parse&& parse) {
  try {
    parse();
  } catch (const InputError&) {
  }
}

// Text that exercises a tokenizer: ASCII words and digits, whitespace runs, accents, CJK, an
// emoji, a lone continuation byte and a special-token lookalike.
inline constexpr std::string_view kSampleText =
    "Hello, world!  It's 2026: 12345 tokens\n\n\tcafé naïve 東京 🙂 \x80 <|endoftext|> end";

// Encodes kSampleText and the fuzzed bytes themselves; every id must lie in the vocabulary and
// decode without throwing.
inline void exercise_tokenizer(const text::Tokenizer& tokenizer, std::string_view input) {
  const int64_t vocab = tokenizer.vocab_size();
  require(vocab > 0, "vocab_size() > 0");
  require(tokenizer.eos_id() >= 0 && tokenizer.eos_id() < vocab, "eos_id() inside the vocabulary");
  for (const std::string_view text : {kSampleText, input.substr(0, 512)}) {
    const std::vector<int64_t> ids = tokenizer.encode(text);
    for (const int64_t id : ids) require(id >= 0 && id < vocab, "encode() ids inside the vocabulary");
    (void)tokenizer.decode(ids);
  }
}

// A tokenizer file: the input written as `name`, loaded by load(path) (an InputError is fine),
// then exercised.
template <class Load>
void fuzz_tokenizer_file(const std::string& name, const uint8_t* data, size_t size, Load&& load) {
  const std::string path = write_input(name, as_text(data, size));
  expect_only_input_errors([&] {
    const auto tokenizer = load(path);
    exercise_tokenizer(*tokenizer, as_text(data, size));
  });
}

}  // namespace xtrain::fuzz
