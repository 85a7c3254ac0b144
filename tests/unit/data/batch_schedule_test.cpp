// BatchSchedule: the global batches do not depend on the number of ranks; balancing evens the
// attention cost of the ranks at every step.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <set>

#include "data/batch_schedule.h"
#include "data/micro_batch.h"
#include "data/permutation.h"
#include "data/token_dataset.h"

using namespace xtrain;

namespace {

// Documents whose lengths follow a heavy-tailed (log-normal, sigma 1.2) distribution: most are
// a few dozen tokens, a few fill a whole sequence, the shape of web text.
std::shared_ptr<data::InMemoryTokenStream> skewed_stream(int64_t tokens, uint64_t seed) {
  auto stream = std::make_shared<data::InMemoryTokenStream>();
  data::SplitMix64 random(seed);
  data::EncodedDocument document;
  while (stream->size() < tokens) {
    const double u1 = (static_cast<double>(random.below(1u << 30)) + 0.5) / (1u << 30);
    const double u2 = (static_cast<double>(random.below(1u << 30)) + 0.5) / (1u << 30);
    const double normal = std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
    const auto length = static_cast<size_t>(std::clamp(std::exp(4.0 + 1.2 * normal), 1.0, 4096.0));
    document.tokens.assign(length, 1);
    document.tokens.back() = 0;
    stream->append(document);
  }
  return stream;
}

std::multiset<int64_t> all_of(const std::vector<std::vector<int64_t>>& per_rank) {
  std::multiset<int64_t> samples;
  for (const auto& rank : per_rank) samples.insert(rank.begin(), rank.end());
  return samples;
}

}  // namespace

TEST_CASE("without balancing, rank r reads the r-th slice of the global batch", "[data][balance]") {
  const data::TokenDataset dataset(skewed_stream(20000, 1), 64, 0, true);
  const data::BatchSchedule schedule(dataset, 8, {});
  const auto samples = schedule.step_samples(16, 4);
  REQUIRE(samples.size() == 4);
  CHECK(samples[0] == std::vector<int64_t>{16, 17});
  CHECK(samples[3] == std::vector<int64_t>{22, 23});
}

TEST_CASE("balanced global batches are the same for any number of ranks", "[data][balance]") {
  const data::TokenDataset dataset(skewed_stream(200000, 2), 512, 0, true);
  const int64_t global_batch = 16, window = 4;
  const data::BatchSchedule schedule(dataset, global_batch, {window, /*pack=*/true, 9});
  std::multiset<int64_t> window_samples;
  for (int64_t step = 0; step < window; ++step) {
    const auto one = all_of(schedule.step_samples(step * global_batch, 1));
    CHECK(one.size() == static_cast<size_t>(global_batch));
    for (int64_t ranks : {2, 4, 8, 16}) {
      const auto split = schedule.step_samples(step * global_batch, ranks);
      CHECK(split.size() == static_cast<size_t>(ranks));
      for (const auto& rank : split) CHECK(rank.size() == static_cast<size_t>(global_batch / ranks));
      CHECK(all_of(split) == one);
    }
    window_samples.insert(one.begin(), one.end());
  }
  // The window's steps read each of its samples once.
  std::multiset<int64_t> expected;
  for (int64_t g = 0; g < window * global_batch; ++g) expected.insert(g);
  CHECK(window_samples == expected);
  CHECK_THROWS(schedule.step_samples(3, 2));  // balanced steps start at whole global batches
}

TEST_CASE("balancing brings the costliest rank close to the mean", "[data][balance]") {
  const data::TokenDataset dataset(skewed_stream(3000000, 3), 2048, 0, true);
  const int64_t global_batch = 32, steps = 40;
  const data::BatchSchedule plain(dataset, global_batch, {0, true, 0});
  const data::BatchSchedule balanced(dataset, global_batch, {16, true, 0});
  for (int64_t ranks : {2, 4, 8}) {
    const auto before = data::measure_balance(dataset, plain, ranks, steps);
    const auto after = data::measure_balance(dataset, balanced, ranks, steps);
    INFO(ranks << " ranks: before " << before.mean_ratio << " (max " << before.max_ratio << "), after "
               << after.mean_ratio << " (max " << after.max_ratio << ")");
    CHECK(before.mean_ratio > 1.1);
    CHECK(after.mean_ratio <= 1.05);
    CHECK(after.mean_ratio < before.mean_ratio);
  }
}
