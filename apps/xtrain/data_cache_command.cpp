#include "data_cache_command.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "data/token_cache.h"
#include "util/input_error.h"

namespace xtrain::cli {
namespace {

// The commands read a cache; creating a folder for a mistyped path would hide the mistake. A
// folder that holds only what the cache did not write is not a cache (a mistyped path to a
// user's folder): refused, so that gc never touches it. In a cache, foreign items are left alone.
data::TokenCache existing_cache(const std::string& dir, data::TokenCache::Access access) {
  if (!std::filesystem::is_directory(dir))
    throw InputError(fmt::format("{}: no such folder; give the data.cache_dir of a recipe", dir));
  data::TokenCache cache(dir, access);
  const auto foreign = cache.foreign();
  if (foreign.empty()) return cache;
  std::string names;
  for (size_t i = 0; i < foreign.size() && i < 3; ++i)
    names += (i ? ", " : "") + std::filesystem::path(foreign[i]).filename().string();
  if (foreign.size() > 3) names += ", ...";
  const auto items = fmt::format("{} item{} that the data cache did not write ({})", foreign.size(),
                                 foreign.size() == 1 ? "" : "s", names);
  if (!cache.holds_cache_items())
    throw InputError(fmt::format("{} is not a data cache: it holds {} and no entry (a folder named by its key "
                                 "holding the entry.json that names it); give the data.cache_dir of a recipe",
                                 dir, items));
  fmt::print(stderr, "warning: {}: leaving alone {}\n", dir, items);
  return cache;
}

std::string local_time(std::time_t time) {
  std::tm parts{};
  localtime_r(&time, &parts);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &parts);
  return text;
}

std::string joined(const std::vector<std::string>& items) {
  std::string text;
  for (const auto& item : items) text += (text.empty() ? "" : ", ") + item;
  return text.empty() ? "?" : text;
}

int run_ls(const std::string& dir) {
  const auto cache = existing_cache(dir, data::TokenCache::Access::read_only);
  const auto entries = cache.entries(/*checksums=*/false);
  uint64_t total = 0;
  for (const auto& entry : entries) total += entry.bytes;
  fmt::print("{}: {} entries, {} (oldest use first)\n", dir, entries.size(), data::format_bytes(total));
  if (entries.empty()) return 0;
  fmt::print("{:<16}  {:>10}  {:>9}  {:>12}  {:<19}  {:<7}  {}\n", "key", "size", "documents", "tokens", "last used",
             "state", "source");
  for (const auto& entry : entries) {
    fmt::print("{:<16}  {:>10}  {:>9}  {:>12}  {:<19}  {:<7}  {}{}\n", entry.key, data::format_bytes(entry.bytes),
               entry.documents, entry.tokens, local_time(static_cast<std::time_t>(entry.last_used_ns / 1000000000)), entry.state, joined(entry.sources),
               entry.problem.empty() ? "" : " (" + entry.problem + ")");
  }
  return 0;
}

int run_verify(const std::string& dir) {
  const auto cache = existing_cache(dir, data::TokenCache::Access::read_only);
  int damaged = 0;
  uint64_t bytes = 0;
  for (const auto& entry : cache.entries(/*checksums=*/true)) {
    bytes += entry.bytes;
    if (entry.state == "damaged") {
      ++damaged;
      fmt::print("damaged  {}: {}\n", entry.dir, entry.problem);
    } else {
      fmt::print("ok       {}\n", entry.dir);
    }
  }
  fmt::print("{}: {} read; {}\n", dir, data::format_bytes(bytes),
             damaged ? fmt::format("{} damaged (the next run that reads one rebuilds it; gc removes it too)", damaged)
                     : std::string("every entry intact"));
  return damaged ? 1 : 0;
}

int run_gc(const std::string& dir, const std::string& max_size) {
  const uint64_t max_bytes = data::parse_byte_size(max_size);
  // gc removes what it collects: a cache it cannot write is refused before anything is read.
  if (std::filesystem::is_directory(dir) && ::access(dir.c_str(), W_OK | X_OK) != 0)
    throw InputError(fmt::format("{}: gc cannot remove anything there ({}); run gc where the cache folder is "
                                 "writable (ls and verify only read, and work on it as it is)",
                                 dir, std::strerror(errno)));
  const auto cache = existing_cache(dir, data::TokenCache::Access::read_write);
  const auto collected = cache.collect(max_bytes);
  for (const auto& path : collected.removed) fmt::print("removed  {}\n", path);
  for (const auto& path : collected.busy) fmt::print("in use   {} (its lock is held: kept)\n", path);
  fmt::print("{}: freed {}, {} kept (at most {})\n", dir, data::format_bytes(collected.freed_bytes),
             data::format_bytes(collected.kept_bytes), data::format_bytes(max_bytes));
  return 0;
}

}  // namespace

std::vector<Command> add_data_cache(CLI::App& data) {
  auto* cache = data.add_subcommand("cache", "The tokenized sources kept in a data.cache_dir folder: ls, verify, gc");
  cache->require_subcommand(1);
  auto dir = std::make_shared<std::string>();
  auto max_size = std::make_shared<std::string>();
  auto* ls = cache->add_subcommand("ls", "List the entries: key, size, counts, last use, state (ok, stale, damaged), source");
  ls->add_option("dir", *dir, "The cache folder (data.cache_dir)")->required();
  auto* verify = cache->add_subcommand("verify", "Read every entry and check its checksums; exit code 1 if one is damaged");
  verify->add_option("dir", *dir, "The cache folder (data.cache_dir)")->required();
  auto* gc = cache->add_subcommand("gc", "Remove unfinished builds, then entries least recently used first, down to a size");
  gc->add_option("dir", *dir, "The cache folder (data.cache_dir)")->required();
  gc->add_option("--max-size", *max_size, "Size to keep at most: bytes, or with K, M, G, T (0 empties the cache)")
      ->required();
  return {{ls, [dir] { return run_ls(*dir); }},
          {verify, [dir] { return run_verify(*dir); }},
          {gc, [dir, max_size] { return run_gc(*dir, *max_size); }}};
}

}  // namespace xtrain::cli
