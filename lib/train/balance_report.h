// `xtrain data balance RECIPE`: how evenly the recipe's training data spreads attention cost
// over data-parallel ranks, without and with data.balance_window, for several rank counts.
// Per step, the costliest rank's cost (sum of squared document pieces, data/batch_schedule.h)
// over the mean rank's; the table shows its mean and worst over the steps measured.
#pragma once
#include <cstdint>
#include <vector>

#include "config/recipe.h"

namespace xtrain::train {

struct BalanceReportOptions {
  std::vector<int64_t> ranks{2, 4, 8};
  int64_t steps = 0;  // 0: train.steps, at most 256
};

int report_balance(const config::Recipe& recipe, const BalanceReportOptions& options);

}  // namespace xtrain::train
