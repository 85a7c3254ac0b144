#include "text/piece_cache.h"

namespace xtrain::text {

bool PieceCache::append(std::string_view piece, std::vector<int64_t>& out) const {
  if (piece.size() > kMaxPieceBytes) return false;
  const std::string key(piece);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = ids_.find(key);
  if (it == ids_.end()) return false;
  out.insert(out.end(), it->second.begin(), it->second.end());
  return true;
}

void PieceCache::store(std::string_view piece, const std::vector<int64_t>& ids, size_t from) const {
  if (piece.size() > kMaxPieceBytes) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (ids_.size() >= kMaxEntries) ids_.clear();
  ids_.emplace(std::string(piece), std::vector<int64_t>(ids.begin() + static_cast<std::ptrdiff_t>(from), ids.end()));
}

}  // namespace xtrain::text
