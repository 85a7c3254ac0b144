#include "config/batch_geometry.h"

#include <catch2/catch.hpp>

using namespace xtrain;

TEST_CASE("a global batch that splits over the data-parallel ranks is no problem", "[config]") {
  CHECK_FALSE(config::batch_geometry_problem(16, 16, 1));
  CHECK_FALSE(config::batch_geometry_problem(64, 4, 4));
  CHECK_FALSE(config::batch_geometry_problem(24, 2, 3));
}

TEST_CASE("a global batch the ranks cannot split names the settings that would", "[config]") {
  // recipes/demo.yaml on 2 ranks: a smaller micro batch keeps the global batch.
  CHECK(config::batch_geometry_problem(16, 16, 2) ==
        "16 must be a multiple of train.micro_batch_size (16) x data-parallel ranks (2) = 32; the global batch does "
        "not depend on the number of ranks: set train.micro_batch_size to 8, or train.global_batch_size to 32");
  CHECK(config::batch_geometry_problem(24, 8, 2) ==
        "24 must be a multiple of train.micro_batch_size (8) x data-parallel ranks (2) = 16; the global batch does "
        "not depend on the number of ranks: set train.micro_batch_size to 6, or train.global_batch_size to 32");
  // 3 ranks cannot share 16 rows at any micro batch.
  CHECK(config::batch_geometry_problem(16, 4, 3) ==
        "16 must be a multiple of train.micro_batch_size (4) x data-parallel ranks (3) = 12; the global batch does "
        "not depend on the number of ranks: set train.global_batch_size to a multiple of 12 (e.g. 24), or run on a "
        "number of data-parallel ranks that divides it");
}
