#include "data/token_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "data/cache_entry.h"
#include "util/durable_file.h"
#include "util/file_lock.h"
#include "util/input_error.h"
#include "util/posix_file.h"

namespace xtrain::data {
namespace {

namespace fs = std::filesystem;

constexpr const char* kBuildPrefix = ".build-";
constexpr const char* kTrashPrefix = ".trash-";

// Keys are XXH3-64 digests as 16 lowercase hex digits (cache_key.h).
bool is_key(const std::string& name) {
  return name.size() == 16 &&
         std::all_of(name.begin(), name.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// The key of a leftover, .build-KEY-PID or .trash-KEY-PID; empty for any other name.
std::string leftover_key(const std::string& name) {
  for (const std::string prefix : {kBuildPrefix, kTrashPrefix}) {
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string rest = name.substr(prefix.size());
    if (rest.size() > 17 && is_key(rest.substr(0, 16)) && rest[16] == '-' &&
        std::all_of(rest.begin() + 17, rest.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return rest.substr(0, 16);
  }
  return "";
}

// An entry is a real folder named by a key whose entry.json reads and names that key: a folder
// of 16 hex characters without one is not the cache's, and is neither listed nor removed.
bool is_entry(const fs::path& dir, const std::string& key) {
  std::error_code error;
  if (!is_key(key) || !fs::is_directory(fs::symlink_status(dir, error)) ||
      !fs::is_regular_file(fs::symlink_status(dir / kEntryManifest, error)))
    return false;
  try {
    return read_entry_manifest(dir.string()).value("key", "") == key;
  } catch (const std::exception&) {
    return false;
  }
}

// What the cache writes: entries, KEY.lock files and the leftovers of builders.
bool is_cache_item(const fs::directory_entry& item) {
  const std::string name = item.path().filename().string();
  std::error_code error;
  const auto status = item.symlink_status(error);
  if (name.size() == 21 && name.substr(16) == ".lock" && is_key(name.substr(0, 16))) return fs::is_regular_file(status);
  if (!leftover_key(name).empty()) return fs::is_directory(status);
  return is_entry(item.path(), name);
}

uint64_t folder_bytes(const fs::path& dir) {
  uint64_t total = 0;
  std::error_code error;
  for (const auto& item : fs::recursive_directory_iterator(dir, error))
    if (item.is_regular_file(error)) total += item.file_size(error);
  return total;
}

int64_t modified_ns(const fs::path& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return 0;
  return static_cast<int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec;
}

// The entry's last use is its folder's modification time, set on every open; a read-only
// cache simply keeps the build time.
void mark_used(const std::string& dir) { ::utimensat(AT_FDCWD, dir.c_str(), nullptr, 0); }

// Moved aside first, so that the key's name is free at once and no reader finds half a folder.
void remove_folder(const fs::path& dir, const std::string& key) {
  const fs::path trash = dir.parent_path() / fmt::format("{}{}-{}", kTrashPrefix, key, ::getpid());
  fs::remove_all(trash);
  fs::rename(dir, trash);
  fs::remove_all(trash);
}

// Whether the source files an entry was made from are still as they were (size and mtime; a
// digest would mean reading them all).
std::string stale_source(const nlohmann::json& manifest) {
  const auto& files = manifest.at("key_inputs").at("files");
  const auto& sources = manifest.at("sources");
  for (size_t i = 0; i < files.size() && i < sources.size(); ++i) {
    const auto path = sources[i].get<std::string>();
    struct stat info {};
    if (::stat(path.c_str(), &info) != 0) return path + " is gone";
    const int64_t mtime = static_cast<int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec;
    if (static_cast<uint64_t>(info.st_size) != files[i].at("size").get<uint64_t>() ||
        mtime != files[i].at("mtime_ns").get<int64_t>())
      return path + " changed";
  }
  return "";
}

// Renames the built folder into place. Another node sharing the folder over a filesystem whose
// locks do not reach across machines may have committed the same key first: its entry holds the
// same bytes, so an intact one is kept and this one dropped.
void commit(const fs::path& temporary, const fs::path& entry, const std::string& key) {
  std::error_code error;
  fs::rename(temporary, entry, error);
  if (!error) return;
  if (fs::exists(entry) && !check_entry(entry.string(), key)) {
    fs::remove_all(temporary);
    return;
  }
  throw fs::filesystem_error("cannot commit the data cache entry", temporary, entry, error);
}

}  // namespace

TokenCache::TokenCache(std::string dir, Access access) : dir_(std::move(dir)) {
  std::error_code error;
  // Reading a cache changes nothing in it, so a read-only folder (a shared, mounted cache) is
  // listed and verified as well as any.
  if (access == Access::read_only) {
    if (!fs::is_directory(dir_, error))
      throw InputError(fmt::format("{}: no such folder; give the data.cache_dir of a recipe", dir_));
    return;
  }
  fs::create_directories(dir_, error);
  if (error)
    throw InputError(fmt::format("data.cache_dir {}: cannot create the folder: {}; set data.cache_dir to a "
                                 "folder this user can write, or leave it empty to tokenize without a cache",
                                 dir_, error.message()));
  std::string reason;
  if (!fs::is_directory(dir_, error))
    reason = "not a folder";
  else if (::access(dir_.c_str(), W_OK | X_OK) != 0)
    reason = std::strerror(errno);
  if (!reason.empty())
    throw InputError(fmt::format("data.cache_dir {}: cannot write there ({}); set data.cache_dir to a folder this "
                                 "user can write, or leave it empty to tokenize without a cache",
                                 dir_, reason));
}

std::string TokenCache::entry_dir(const std::string& key) const { return (fs::path(dir_) / key).string(); }

TokenCache::Opened TokenCache::open(const std::string& key, const nlohmann::json& info, const Build& build) const {
  Opened opened;
  opened.dir = entry_dir(key);
  opened.prefix = (fs::path(opened.dir) / kEntryTokens).string();
  std::error_code error;
  if (fs::exists(opened.dir, error) && !check_entry(opened.dir, key)) {
    mark_used(opened.dir);
    return opened;
  }
  const std::string lock_path = (fs::path(dir_) / (key + ".lock")).string();
  auto lock = util::FileLock::try_acquire(lock_path);
  if (!lock) {
    opened.waited = true;
    fmt::print("data cache: waiting for another process, which holds {}, to write {}\n", lock_path, opened.dir);
    std::fflush(stdout);
    lock.emplace(util::FileLock::acquire(lock_path));
  }
  if (fs::exists(opened.dir, error)) {
    const auto problem = check_entry(opened.dir, key);
    if (!problem) {
      mark_used(opened.dir);
      return opened;
    }
    if (!is_entry(opened.dir, key))
      throw InputError(fmt::format("data.cache_dir {}: {} is not a cache entry (it has no entry.json naming key {}), "
                                   "and the cache removes only what it wrote: move that folder away, or set "
                                   "data.cache_dir to a folder of the cache's own",
                                   dir_, opened.dir, key));
    opened.repaired = *problem;
    fmt::print(stderr, "warning: data cache entry {} is damaged ({}); removing it and tokenizing the source again\n",
               opened.dir, *problem);
    remove_folder(opened.dir, key);
  }
  remove_leftovers(key);
  build_entry(key, info, build);
  opened.how = Opened::How::built;
  return opened;
}

std::string TokenCache::build_entry(const std::string& key, const nlohmann::json& info, const Build& build) const {
  const fs::path temporary = fs::path(dir_) / fmt::format("{}{}-{}", kBuildPrefix, key, ::getpid());
  const fs::path entry = entry_dir(key);
  fs::remove_all(temporary);
  fs::create_directory(temporary);
  try {
    nlohmann::json manifest = info;
    manifest.update(build((temporary / kEntryTokens).string()));
    manifest["key"] = key;
    write_entry_manifest(temporary.string(), manifest);
    util::fsync_path(temporary.string());
    commit(temporary, entry, key);
    util::fsync_path(dir_);
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(temporary, ignored);
    throw;
  }
  return entry.string();
}

// Called with the key's lock held: a .build folder of this key belongs to a builder that died.
void TokenCache::remove_leftovers(const std::string& key) const {
  for (const auto& item : fs::directory_iterator(dir_)) {
    const std::string name = item.path().filename().string();
    if (name.rfind(kBuildPrefix, 0) != 0 || leftover_key(name) != key) continue;
    fmt::print(stderr, "warning: data cache: removing {}, the unfinished entry of a process that stopped\n",
               item.path().string());
    fs::remove_all(item.path());
  }
}

std::vector<TokenCache::EntryStatus> TokenCache::entries(bool checksums) const {
  std::vector<EntryStatus> entries;
  for (const auto& item : fs::directory_iterator(dir_)) {
    const std::string name = item.path().filename().string();
    if (!is_entry(item.path(), name)) continue;
    EntryStatus status;
    status.key = name;
    status.dir = item.path().string();
    status.bytes = folder_bytes(item.path());
    status.last_used_ns = modified_ns(item.path());
    status.state = "ok";
    if (auto problem = check_entry(status.dir, name, checksums)) {
      status.state = "damaged";
      status.problem = *problem;
    }
    try {
      const nlohmann::json manifest = read_entry_manifest(status.dir);
      status.documents = manifest.value("documents", int64_t{0});
      status.tokens = manifest.value("tokens", int64_t{0});
      for (const auto& source : manifest.at("sources")) status.sources.push_back(source.get<std::string>());
      if (status.state == "ok") {
        status.problem = stale_source(manifest);
        if (!status.problem.empty()) status.state = "stale";
      }
    } catch (const std::exception&) {
      // A manifest that does not read was reported as damage above.
    }
    entries.push_back(std::move(status));
  }
  std::sort(entries.begin(), entries.end(), [](const EntryStatus& a, const EntryStatus& b) {
    return a.last_used_ns != b.last_used_ns ? a.last_used_ns < b.last_used_ns : a.key < b.key;
  });
  return entries;
}

std::vector<std::string> TokenCache::foreign() const {
  std::vector<std::string> paths;
  for (const auto& item : fs::directory_iterator(dir_))
    if (!is_cache_item(item)) paths.push_back(item.path().string());
  std::sort(paths.begin(), paths.end());
  return paths;
}

bool TokenCache::holds_cache_items() const {
  for (const auto& item : fs::directory_iterator(dir_))
    if (is_cache_item(item)) return true;
  return false;
}

TokenCache::Collected TokenCache::collect(uint64_t max_bytes) const {
  Collected collected;
  // Leftovers first: their builder is gone when nobody holds their key's lock.
  for (const auto& item : fs::directory_iterator(dir_)) {
    const std::string key = leftover_key(item.path().filename().string());
    std::error_code error;
    if (key.empty() || !fs::is_directory(item.symlink_status(error))) continue;
    auto lock = util::FileLock::try_acquire((fs::path(dir_) / (key + ".lock")).string());
    if (!lock) continue;
    collected.freed_bytes += folder_bytes(item.path());
    fs::remove_all(item.path());
    collected.removed.push_back(item.path().string());
  }
  std::vector<EntryStatus> all = entries(/*checksums=*/false);
  uint64_t total = 0;
  for (const auto& entry : all) total += entry.bytes;
  for (const auto& entry : all) {
    if (total <= max_bytes) break;
    const std::string lock_path = (fs::path(dir_) / (entry.key + ".lock")).string();
    auto lock = util::FileLock::try_acquire(lock_path);
    if (!lock) {
      collected.busy.push_back(entry.dir);
      continue;
    }
    // The lock file stays: a process waiting on it would otherwise hold a lock that a newcomer,
    // opening a new file of the same name, does not see.
    remove_folder(entry.dir, entry.key);
    total -= entry.bytes;
    collected.freed_bytes += entry.bytes;
    collected.removed.push_back(entry.dir);
  }
  collected.kept_bytes = total;
  return collected;
}

uint64_t parse_byte_size(const std::string& text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const std::string unit = used > 0 ? text.substr(used) : "";
  const std::string units = "KMGT";
  double scale = 1;
  if (!unit.empty()) {
    const auto position = units.find(static_cast<char>(std::toupper(static_cast<unsigned char>(unit[0]))));
    const bool suffix_ok = unit.size() == 1 || (unit.size() == 2 && (unit[1] == 'B' || unit[1] == 'b'));
    if (position == std::string::npos || !suffix_ok)
      used = 0;
    else
      scale = std::pow(1024.0, static_cast<double>(position + 1));
  }
  if (used == 0 || value < 0 || !std::isfinite(value))
    throw InputError(fmt::format("'{}' is not a size: write bytes, or a number with K, M, G or T (1G = 1024M)", text));
  return static_cast<uint64_t>(value * scale);
}

std::string format_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(units)) {
    value /= 1024;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", value, units[unit]);
}

}  // namespace xtrain::data
