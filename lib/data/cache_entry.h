// One entry of the data cache (token_cache.h): a folder named by its key (cache_key.h) holding
// the token stream of one source as an indexed dataset, tokens.idx + tokens.bin (the documents
// are its sequences, so their starts are kept), with tokens.loss_mask.idx + .bin when the source
// has conversations (indexed_token_stream.h reads both), and entry.json: what the key was made
// from, the source paths, counts, and the size and XXH3-64 digest of every other file, plus the
// digest of its own listing ("manifest_xxh3"), so that a changed byte anywhere is found.
// An entry is written whole in a temporary folder and renamed into place; it is never changed
// after, so any difference from its manifest is damage.
#pragma once
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace xtrain::data {

constexpr const char* kEntryManifest = "entry.json";
constexpr const char* kEntryTokens = "tokens";  // the indexed dataset's prefix inside the entry

// Digests every other regular file in dir and writes entry.json there, fsynced, holding info's
// fields too ("key", "key_inputs", "sources", "documents", "tokens", ...).
void write_entry_manifest(const std::string& dir, nlohmann::json info);

// nullopt when dir holds an intact entry of this key: its manifest reads, names the key and has
// its own digest, and every file it lists has its size and (with checksums) its digest, with no
// file missing or unlisted. Otherwise what is wrong, naming the file.
std::optional<std::string> check_entry(const std::string& dir, const std::string& key, bool checksums = true);

// The manifest as written; an InputError naming the file when it does not read.
nlohmann::json read_entry_manifest(const std::string& dir);

}  // namespace xtrain::data
