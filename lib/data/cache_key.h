// The key of a data cache entry (token_cache.h): a digest of everything a source's token stream
// is made from. The files of the source, in document order, each with its kind (text or JSONL),
// size, modification time (ns) and XXH3 digest of its content; the tokenizer's fingerprint
// (its kind and the digests of its files, vocabulary size and EOS id, not its path, so that a
// moved tokenizer keeps its entries); the chat template; the objective; the sequence length; and
// the cache's format version. A changed byte, a touched file or another tokenizer gives another
// key, so an entry is never read for data it was not made from. Paths are not part of the key:
// they are recorded in the entry for `xtrain data cache ls` only.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/tokenizer.h"

namespace xtrain::data {

// Bumped whenever what an entry holds, or how sources are tokenized into it, changes.
constexpr int kCacheFormatVersion = 1;

struct SourceFile {
  std::string path;
  std::string kind;  // "text" or "jsonl"
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  std::string xxh3;
};

struct CacheKeyInputs {
  std::vector<SourceFile> files;
  std::string tokenizer;  // tokenizer_fingerprint()
  std::string chat_template;
  std::string objective;
  int64_t seq_len = 0;
};

// Whether a data.train / data.eval source (one, not a list) is read from files the cache can
// fingerprint: a text file, a folder or a .jsonl file (not builtin: or megatron:).
bool is_cacheable_source(const std::string& source);
// The files of a cacheable source, in document order, each read once to digest it. A missing
// or unreadable file is an InputError naming it.
std::vector<SourceFile> fingerprint_source(const std::string& source);
std::string tokenizer_fingerprint(const std::string& spec, const text::Tokenizer& tokenizer);

// What the key is a digest of, as stored in an entry's manifest (no paths).
nlohmann::json key_inputs_json(const CacheKeyInputs& inputs);
// 16 hex digits.
std::string cache_key(const CacheKeyInputs& inputs);

}  // namespace xtrain::data
