// The check before the first step (train/micro_batch_memory.h): a micro batch above the lower
// bound of what it keeps alive for backward is refused with the micro batch that would fit; one
// below it passes, and an unknown amount of memory never refuses.
#include <catch2/catch.hpp>

#include "config/recipe.h"
#include "train/micro_batch_memory.h"

using namespace xtrain;

namespace {

config::Recipe recipe(int64_t micro_batch, const std::string& chunked_loss = "auto") {
  config::Recipe r;
  r.model.hidden_size = 128;
  r.model.num_layers = 4;
  r.model.vocab_size = 1000;
  r.data.seq_len = 256;
  r.train.dtype = config::Dtype::fp32;
  r.train.micro_batch_size = micro_batch;
  r.train.global_batch_size = 48;
  r.memory.chunked_loss = chunked_loss;
  return r;
}

}  // namespace

TEST_CASE("a sequence's lower bound counts each block's input, split by pp, sequence-parallel tp and cp", "[train][memory]") {
  const int64_t block_inputs = 256 * 128 * 4 * 4;  // tokens x hidden x fp32 x layers
  CHECK(train::sequence_bytes_lower_bound(recipe(1), {}) == block_inputs);
  CHECK(train::sequence_bytes_lower_bound(recipe(1, "off"), {}) == block_inputs + 256 * 1000 * 4);
  CHECK(train::sequence_bytes_lower_bound(recipe(1), {1, 2}) == block_inputs / 2);
  auto bf16 = recipe(1);
  bf16.train.dtype = config::Dtype::bf16;
  CHECK(train::sequence_bytes_lower_bound(bf16, {}) == block_inputs / 2);
  auto sequence_parallel = recipe(1);
  sequence_parallel.parallel.sequence_parallel = true;
  CHECK(train::sequence_bytes_lower_bound(sequence_parallel, {4, 1}) == block_inputs / 4);
  auto context_parallel = recipe(1, "off");
  context_parallel.parallel.cp = 4;
  CHECK(train::sequence_bytes_lower_bound(context_parallel, {}) == (block_inputs + 256 * 1000 * 4) / 4);
  context_parallel.parallel.sequence_parallel = true;
  CHECK(train::sequence_bytes_lower_bound(context_parallel, {2, 1}) == block_inputs / 8 + 256 / 4 * 1000 * 4 / 2);
}

TEST_CASE("a micro batch above the bound is refused with the micro batch that would fit", "[train][memory]") {
  const int64_t per_sequence = 256 * 128 * 4 * 4;  // 0.5 MiB
  const train::RankShape two_data_ranks{1, 1, 2, 1};
  CHECK_FALSE(train::micro_batch_memory_problem(recipe(24), two_data_ranks, 24 * per_sequence, "memory"));
  CHECK_FALSE(train::micro_batch_memory_problem(recipe(24), two_data_ranks, -1, "memory"));
  // 24 sequences a data rank; 10 would fit the bound, and 8 is the largest micro batch dividing 24.
  const auto problem = train::micro_batch_memory_problem(recipe(24), two_data_ranks, 10 * per_sequence, "the test's");
  REQUIRE(problem);
  CHECK(*problem ==
        "24 sequences of 256 tokens keep at least 12.0 MiB alive for backward on this rank (each block's input, 4 "
        "layers x hidden 128 x 4 bytes a token), more than the 5.0 MiB available to it (the test's); "
        "train.micro_batch_size 8 would fit this bound (it divides the 24 sequences a data rank takes per step)");
  const auto none = train::micro_batch_memory_problem(recipe(1), two_data_ranks, per_sequence / 2, "memory");
  REQUIRE(none);
  CHECK_THAT(*none, Catch::Contains("not even one sequence fits: shorten data.seq_len"));
}
