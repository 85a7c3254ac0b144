#include <torch/torch.h>

#include <limits>

#include "train/non_finite_guard.h"

// Catch after torch: c10 defines a CHECK macro of its own.
#include <catch2/catch.hpp>

using namespace xtrain;

TEST_CASE("non-finite steps are skipped and counted; a finite one ends the run of skips", "[train][nonfinite]") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  train::NonFiniteGuard guard(3);
  CHECK(guard.admit(1, 2.0, 1.0));
  CHECK_FALSE(guard.admit(2, 2.0, nan));
  CHECK_FALSE(guard.admit(3, inf, 1.0));
  CHECK(guard.in_a_row() == 2);
  CHECK(guard.first_of_run() == 2);
  CHECK_FALSE(guard.exhausted());
  CHECK(guard.admit(4, 2.0, 1.0));
  CHECK(guard.in_a_row() == 0);
  for (int64_t step = 5; step <= 7; ++step) CHECK_FALSE(guard.admit(step, nan, nan));
  CHECK(guard.exhausted());
  CHECK(guard.first_of_run() == 5);
  CHECK(guard.total() == 5);
}

TEST_CASE("all_finite finds a single NaN or infinity in any tensor", "[train][nonfinite]") {
  auto a = torch::randn({100}), b = torch::randn({3, 3});
  CHECK(train::all_finite({a, b}));
  b[1][2] = std::numeric_limits<float>::quiet_NaN();
  CHECK_FALSE(train::all_finite({a, b}));
  b[1][2] = 0;
  a[99] = -std::numeric_limits<float>::infinity();
  CHECK_FALSE(train::all_finite({a, b}));
  CHECK(train::all_finite({torch::full({4}, 3e38f)}));  // large is not infinite
  CHECK(train::describe_non_finite({{"b", b}, {"a", a}}) == "'a' has 0 NaN and 1 infinite values of 100");
  CHECK_THROWS_WITH(train::require_finite_weights({{"a", a}}, "ckpt/step-3"),
                    "ckpt/step-3: the weights are not finite ('a' has 0 NaN and 1 infinite values of 100); this "
                    "checkpoint cannot be used: take an earlier one");
}
