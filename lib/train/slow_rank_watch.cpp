#include "train/slow_rank_watch.h"

#include <map>

namespace xtrain::train {

std::optional<SlowRankWatch::Finding> SlowRankWatch::add(const RankSpread& busy) {
  recent_.push_back(busy);
  if (static_cast<int64_t>(recent_.size()) > window_) recent_.pop_front();
  std::map<int64_t, int64_t> slowest;
  for (const auto& s : recent_) ++slowest[s.argmax];
  int64_t rank = -1, steps = 0;
  for (const auto& [r, count] : slowest)
    if (count > steps) std::tie(rank, steps) = std::pair{r, count};
  // Most of a full window, so that the first steps alone name no one.
  if (static_cast<int64_t>(recent_.size()) < window_ || 2 * steps <= window_) return std::nullopt;
  double ratio_sum = 0;
  for (const auto& s : recent_)
    if (s.argmax == rank) ratio_sum += s.mean > 0 ? s.max / s.mean : 1.0;
  const double ratio = ratio_sum / static_cast<double>(steps);
  if (ratio <= 1.0 + fraction_) return std::nullopt;
  return Finding{rank, steps, static_cast<int64_t>(recent_.size()), ratio};
}

}  // namespace xtrain::train
