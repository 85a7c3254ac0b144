// PieceCache: remembers the ids of recently encoded pre-tokens. Natural text repeats a small
// set of words, so most pieces skip the merge loop. Bounded (it is emptied when full) and
// safe to share between threads.
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace xtrain::text {

class PieceCache {
 public:
  static constexpr size_t kMaxPieceBytes = 64;  // longer pieces are rare and not worth keeping
  static constexpr size_t kMaxEntries = 1 << 18;

  // Appends the cached ids of `piece` to `out`; false if it is not cached.
  bool append(std::string_view piece, std::vector<int64_t>& out) const;
  // Caches ids[from..] as the encoding of `piece`.
  void store(std::string_view piece, const std::vector<int64_t>& ids, size_t from) const;

 private:
  mutable std::mutex mutex_;
  mutable std::unordered_map<std::string, std::vector<int64_t>> ids_;
};

}  // namespace xtrain::text
