// TRL's kl and clip_ratio/*_mean over processes (train/grpo_token_means.h): at each micro step the
// ranks' token sums over their pooled tokens, then the mean over the micro steps.
#include "train/grpo_token_means.h"

#include <map>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "parallel/rank_threads.h"
#include "parallel/thread_comm.h"

using xtrain::train::pooled_token_means;

TEST_CASE("GRPO token means pool the ranks' tokens at each micro step, then average the steps", "[grpo]") {
  // Micro step 0: rank 0 a mean of 0.5 over 4 tokens, rank 1 0 over 12: (2 + 0) / 16. Micro step
  // 1: 1 over 2, 0.25 over 8: (2 + 2) / 10. Their mean, 0.2625, where the mean of the ranks' own
  // means would be 0.4375.
  const std::map<std::string, std::vector<double>> sums{{"kl", {2.0, 4.0}}};
  CHECK(pooled_token_means(sums, {16, 10}).at("kl") == Approx((2.0 / 16 + 4.0 / 10) / 2));
  // A micro step without tokens counts as 0 (TRL's count clamped at 1).
  CHECK(pooled_token_means({{"kl", {0.0, 3.0}}}, {0, 6}).at("kl") == Approx(0.25));
  CHECK_THROWS_WITH(pooled_token_means({{"kl", {1.0}}}, {2, 2}), "pooled_token_means: kl has not one sum a micro batch");
  CHECK(xtrain::train::is_grpo_token_mean("clip_ratio/region_mean"));
  CHECK_FALSE(xtrain::train::is_grpo_token_mean("clip_ratio/low_min"));

  // The same figures from two ranks' means over their own tokens, in one all-reduce; a third
  // rank that reports nothing (share 0, a tensor-parallel peer) changes nothing.
  const auto comms = xtrain::parallel::make_thread_comms(3, "token-means");
  const std::vector<std::map<std::string, std::vector<double>>> means{
      {{"kl", {0.5, 1.0}}, {"clip_ratio/low_mean", {0.25, 0.0}}},
      {{"kl", {0.0, 0.25}}, {"clip_ratio/low_mean", {0.5, 0.5}}},
      {{"kl", {9.0, 9.0}}, {"clip_ratio/low_mean", {9.0, 9.0}}}};
  const std::vector<std::vector<double>> tokens{{4, 2}, {12, 8}, {5, 5}};
  std::vector<std::map<std::string, double>> seen(3);
  const auto errors = xtrain::testing::run_ranks(3, [&](int64_t r) {
    const auto at = static_cast<size_t>(r);
    xtrain::train::RankSums sums(comms[at], torch::kCPU);
    seen[at] = xtrain::train::token_means_over_ranks(means[at], tokens[at], r == 2 ? 0.0 : 1.0, sums);
  });
  CHECK(errors == std::vector<std::string>(3));
  for (const auto& figures : seen) {
    CHECK(figures.at("kl") == Approx(0.2625));
    CHECK(figures.at("clip_ratio/low_mean") == Approx(((1.0 + 6.0) / 16 + (0.0 + 4.0) / 10) / 2));
  }
}
