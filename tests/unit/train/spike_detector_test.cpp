#include <catch2/catch.hpp>

#include <limits>

#include "train/spike_detector.h"

using xtrain::train::SpikeDetector;

TEST_CASE("spikes: measured once the window is full, against its mean and deviation", "[train][spike]") {
  SpikeDetector detector(/*window=*/4, /*zscore=*/3.0);
  // Not full yet: nothing is a spike.
  for (const double loss : {2.0, 2.2, 1.8}) {
    CHECK_FALSE(detector.check(loss * 100, 1.0));
    detector.add(loss, 1.0);
  }
  detector.add(2.0, 1.0);  // window: 2.0 2.2 1.8 2.0, mean 2.0, sample deviation 0.1633
  CHECK_FALSE(detector.check(2.0 + 2.9 * 0.1633, 1.0));
  const auto spike = detector.check(2.0 + 3.1 * 0.16330, 1.0);
  REQUIRE(spike);
  CHECK(spike->quantity == "loss");
  CHECK(spike->zscore == Approx(3.1).epsilon(1e-3));
  CHECK(spike->describe() == "loss 2.506 is 3.1 standard deviations above the mean 2 of the last 4 steps");
  // Low is never a spike, nor is a value that is not finite (the non-finite guard's case).
  CHECK_FALSE(detector.check(0.01, 1.0));
  CHECK_FALSE(detector.check(std::numeric_limits<double>::quiet_NaN(), 1.0));
}

TEST_CASE("spikes: the gradient norm too; the window slides", "[train][spike]") {
  SpikeDetector detector(3, 6.0);
  for (int i = 0; i < 3; ++i) detector.add(2.0, 0.5);
  // A flat window: the deviation is taken as 1% of the mean, so small noise is no spike.
  CHECK_FALSE(detector.check(2.1, 0.5));
  const auto spike = detector.check(2.0, 0.6);
  REQUIRE(spike);
  CHECK(spike->quantity == "gradient norm");
  CHECK(spike->zscore == Approx(20.0));
  // The oldest values leave the window.
  for (int i = 0; i < 3; ++i) detector.add(4.0, 0.5);
  CHECK_FALSE(detector.check(4.1, 0.5));
  CHECK(detector.check(5.0, 0.5));
}
