// TokenCache: the folder of data.cache_dir, holding tokenized sources as entries (cache_entry.h)
// named by their keys (cache_key.h), shared by runs, restarts and the ranks of a node.
//   KEY/                an entry, committed
//   KEY.lock            flock'ed by whoever builds or removes KEY (util/file_lock.h)
//   .build-KEY-PID/     an entry being built; renamed to KEY once written and fsynced
// open() reads an intact entry without locking. When the entry is missing or damaged it takes
// KEY.lock and looks again, since the process that held the lock may have built it meanwhile;
// only when it is still missing or damaged does this process build it: so one process per
// node builds, and the others wait and then read its entry. A damaged entry is reported on
// stderr, naming the entry and what is wrong, and rebuilt; it is never read. Leftovers of a
// builder that died (.build-KEY-*) are removed by the next builder of KEY, or by collect().
// Only what the cache wrote is its own: a KEY/ folder is an entry when its entry.json reads and
// names KEY. Anything else in the folder (a user's folder of 16 hex characters included) is
// foreign: never listed as an entry, never removed.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace xtrain::data {

class TokenCache {
 public:
  // read_write creates dir when missing; a dir that cannot be created or written is an
  // InputError naming it and the fix. read_only (ls, verify) needs an existing folder only.
  enum class Access { read_write, read_only };
  explicit TokenCache(std::string dir, Access access = Access::read_write);

  const std::string& dir() const { return dir_; }
  std::string entry_dir(const std::string& key) const;

  // Writes the indexed dataset at prefix and returns the manifest's counts ("documents", ...).
  using Build = std::function<nlohmann::json(const std::string& prefix)>;
  struct Opened {
    enum class How { reused, built };
    How how = How::reused;
    std::string prefix;  // of the entry's indexed dataset
    std::string dir;
    bool waited = false;  // another process held the lock first
    std::string repaired;  // non-empty: the entry was damaged, and this is what was wrong
  };
  // info: the manifest's fields that describe the entry ("key_inputs", "sources").
  Opened open(const std::string& key, const nlohmann::json& info, const Build& build) const;

  struct EntryStatus {
    std::string key;
    std::string dir;
    uint64_t bytes = 0;
    int64_t documents = 0;
    int64_t tokens = 0;
    int64_t last_used_ns = 0;  // since the epoch
    std::vector<std::string> sources;
    // ok; stale: a source changed or is gone (no run will read it again); damaged
    std::string state;
    std::string problem;
  };
  // Every entry, oldest use first; with checksums every file is read and digested.
  std::vector<EntryStatus> entries(bool checksums) const;
  // The paths of what the cache did not write (not an entry, a KEY.lock or a leftover), which
  // it leaves alone; whether it holds anything of its own (an empty folder is a cache too).
  std::vector<std::string> foreign() const;
  bool holds_cache_items() const;

  struct Collected {
    std::vector<std::string> removed;  // entries and leftovers, as paths
    std::vector<std::string> busy;     // skipped: their lock was held
    uint64_t freed_bytes = 0;
    uint64_t kept_bytes = 0;
  };
  // Removes leftovers of dead builders, then entries least recently used first until the rest
  // take at most max_bytes. Entries whose lock another process holds are left alone.
  Collected collect(uint64_t max_bytes) const;

 private:
  std::string build_entry(const std::string& key, const nlohmann::json& info, const Build& build) const;
  void remove_leftovers(const std::string& key) const;

  std::string dir_;
};

// "512", "10K", "1.5G": bytes, with K, M, G, T as powers of 1024. An InputError otherwise.
uint64_t parse_byte_size(const std::string& text);
std::string format_bytes(uint64_t bytes);

}  // namespace xtrain::data
