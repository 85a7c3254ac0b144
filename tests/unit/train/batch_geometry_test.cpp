#include "train/batch_geometry.h"
#include "util/input_error.h"

#include <catch2/catch.hpp>

using namespace xtrain;

namespace {

std::string problem(int64_t global_batch_size, int64_t micro_batch_size, int64_t data_ranks) {
  try {
    train::accumulation_steps(global_batch_size, micro_batch_size, data_ranks);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("accumulation steps follow from the global batch", "[train]") {
  CHECK(train::accumulation_steps(16, 16, 1) == 1);
  CHECK(train::accumulation_steps(64, 4, 4) == 4);
  CHECK(train::accumulation_steps(24, 2, 3) == 4);
}

TEST_CASE("a global batch the ranks cannot split names the settings that would", "[train]") {
  // recipes/demo.yaml on 2 ranks: a smaller micro batch keeps the global batch.
  CHECK(problem(16, 16, 2) ==
        "train.global_batch_size (16) must be a multiple of train.micro_batch_size (16) x data-parallel ranks (2) = "
        "32; the global batch does not depend on the number of ranks: set train.micro_batch_size to 8, or "
        "train.global_batch_size to 32");
  CHECK(problem(24, 8, 2) ==
        "train.global_batch_size (24) must be a multiple of train.micro_batch_size (8) x data-parallel ranks (2) = "
        "16; the global batch does not depend on the number of ranks: set train.micro_batch_size to 6, or "
        "train.global_batch_size to 32");
  // 3 ranks cannot share 16 rows at any micro batch.
  CHECK(problem(16, 4, 3) ==
        "train.global_batch_size (16) must be a multiple of train.micro_batch_size (4) x data-parallel ranks (3) = "
        "12; the global batch does not depend on the number of ranks: set train.global_batch_size to a multiple "
        "of 12 (e.g. 24), or run on a number of data-parallel ranks that divides it");
}
