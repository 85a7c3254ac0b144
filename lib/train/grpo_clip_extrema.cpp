#include "train/grpo_clip_extrema.h"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace xtrain::train {

namespace {

// Over the ranks at each micro step, the least (or most) that is not NaN; then the mean over the
// micro steps (NaN where a step's are all NaN, as TRL's mean of its logged figures).
double mean_of_extremes(const std::vector<std::vector<double>>& figures, bool most) {
  if (figures.empty() || figures.front().empty()) return std::numeric_limits<double>::quiet_NaN();
  const size_t steps = figures.front().size();
  double total = 0;
  for (size_t k = 0; k < steps; ++k) {
    double extreme = std::numeric_limits<double>::quiet_NaN();
    for (const auto& rank : figures) {
      if (rank.size() != steps) throw std::invalid_argument("clip_extrema: the ranks hold different micro batch counts");
      const double value = rank[k];
      if (!std::isnan(value) && (std::isnan(extreme) || (most ? value > extreme : value < extreme))) extreme = value;
    }
    total += extreme;
  }
  return total / static_cast<double>(steps);
}

}  // namespace

ClipExtrema clip_extrema(const std::vector<std::vector<double>>& low_min,
                         const std::vector<std::vector<double>>& high_max) {
  return {mean_of_extremes(low_min, false), mean_of_extremes(high_max, true)};
}

ClipExtrema clip_extrema_over_ranks(const std::vector<double>& low_min, const std::vector<double>& high_max,
                                    RankSums& sums) {
  std::vector<double> mine = low_min;
  mine.insert(mine.end(), high_max.begin(), high_max.end());
  const auto all = sums.gather(mine);
  std::vector<std::vector<double>> lows, highs;
  const auto half = static_cast<std::ptrdiff_t>(low_min.size());
  for (const auto& rank : all) {
    lows.emplace_back(rank.begin(), rank.begin() + half);
    highs.emplace_back(rank.begin() + half, rank.end());
  }
  return clip_extrema(lows, highs);
}

}  // namespace xtrain::train
