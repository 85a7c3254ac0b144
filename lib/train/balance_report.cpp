#include "train/balance_report.h"

#include <algorithm>

#include <fmt/format.h>

#include "data/batch_schedule.h"
#include "train/recipe_data.h"
#include "util/input_error.h"

namespace xtrain::train {

int report_balance(const config::Recipe& recipe, const BalanceReportOptions& options) {
  const int64_t window = recipe.data.balance_window;
  if (window <= 0)
    throw InputError("data.balance_window is 0 (off): set the window to compare, e.g. --set data.balance_window=16");
  const int64_t global_batch = recipe.train.global_batch_size;
  for (int64_t ranks : options.ranks)
    if (ranks <= 0 || global_batch % ranks != 0)
      throw InputError(fmt::format("--ranks {}: the ranks must divide train.global_batch_size ({})", ranks,
                                   global_batch));
  int64_t steps = options.steps > 0 ? options.steps : std::min<int64_t>(recipe.train.steps, 256);
  steps = std::max<int64_t>(window, steps / window * window);  // whole windows

  auto tokenizer = text::make_tokenizer(recipe.data.tokenizer);
  const auto dataset = load_recipe_dataset("data.train", recipe.data.train, *tokenizer, recipe, recipe.data.shuffle);
  const uint64_t seed = static_cast<uint64_t>(recipe.run.seed);
  const data::BatchSchedule plain(*dataset, global_batch, {0, recipe.data.pack, seed});
  const data::BatchSchedule balanced(*dataset, global_batch, {window, recipe.data.pack, seed});

  fmt::print("data: {} samples of {} tokens, pack {}, global batch {}, {} steps in windows of {}\n",
             dataset->num_samples(), dataset->seq_len(), recipe.data.pack ? "on" : "off", global_batch, steps, window);
  fmt::print("costliest rank's attention cost / mean rank's, per step (mean over steps, worst step)\n\n");
  fmt::print("| ranks | without balancing | worst | with balance_window {} | worst |\n", window);
  fmt::print("|---|---|---|---|---|\n");
  for (int64_t ranks : options.ranks) {
    const auto before = data::measure_balance(*dataset, plain, ranks, steps);
    const auto after = data::measure_balance(*dataset, balanced, ranks, steps);
    fmt::print("| {} | {:.3f} | {:.3f} | {:.3f} | {:.3f} |\n", ranks, before.mean_ratio, before.max_ratio,
               after.mean_ratio, after.max_ratio);
  }
  return 0;
}

}  // namespace xtrain::train
