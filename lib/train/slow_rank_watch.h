// Names a rank that keeps being the slowest: over the last `window` steps, the rank whose busy
// time (forward and backward, less waits on peers; train/training_step.h) was the maximum in
// more than half of them, when those steps' busiest rank took more than 1 + fraction times the
// mean. A straggler that stands out once is noise; one that stands out most steps slows the job.
#pragma once
#include <cstdint>
#include <deque>
#include <optional>

#include "train/rank_sums.h"

namespace xtrain::train {

class SlowRankWatch {
 public:
  SlowRankWatch(int64_t window, double fraction) : window_(window), fraction_(fraction) {}

  struct Finding {
    int64_t rank = 0;
    int64_t steps = 0;   // of the window's, in which it was the slowest
    int64_t window = 0;  // steps seen, up to the window
    double ratio = 0;    // its mean busy time over the mean rank's, in those steps
  };
  // The finding after one more step's spread, while a rank is one.
  std::optional<Finding> add(const RankSpread& busy);

 private:
  int64_t window_;
  double fraction_;
  std::deque<RankSpread> recent_;
};

}  // namespace xtrain::train
