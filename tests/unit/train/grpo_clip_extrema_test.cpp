// TRL's clip_ratio/low_min and high_max over processes (train/grpo_clip_extrema.h): at each micro
// step the least (most) of every rank's figure, NaN ignored, then the mean over the micro steps.
#include "train/grpo_clip_extrema.h"

#include <cmath>
#include <limits>

#include <catch2/catch.hpp>

using xtrain::train::clip_extrema;

TEST_CASE("clip extrema: the least and most over ranks at each micro step, then the mean", "[grpo]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // Two ranks, three micro steps; a rank whose completions were all masked gives NaN.
  const auto extrema = clip_extrema({{0.5, 0.25, nan}, {0.125, nan, 0.75}}, {{0.5, 0.25, nan}, {0.125, nan, 0.75}});
  CHECK(extrema.low_min == (0.125 + 0.25 + 0.75) / 3);
  CHECK(extrema.high_max == (0.5 + 0.25 + 0.75) / 3);
  // One rank: its own figures' mean. A micro step with every rank NaN makes the mean NaN, as TRL's.
  CHECK(clip_extrema({{0.5, 0.0}}, {{1.0, 0.5}}).low_min == 0.25);
  CHECK(std::isnan(clip_extrema({{nan, 0.5}, {nan, 0.0}}, {{0.0, 0.0}, {0.0, 0.0}}).low_min));
  CHECK_THROWS_WITH(clip_extrema({{0.5}, {0.5, 0.5}}, {{0.5}, {0.5, 0.5}}),
                    "clip_extrema: the ranks hold different micro batch counts");
}
