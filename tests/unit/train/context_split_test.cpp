// A micro batch's context-parallel parts (train/context_split.h) with multi-token prediction: each
// depth's inputs and targets are shifted over the whole row, then split as the row is, so that a
// rank's chunk ends with the next chunk's tokens; the whole batch's target counts come along.
#include <torch/torch.h>

#include "data/micro_batch.h"
#include "train/context_split.h"

// Catch after torch: c10 defines a CHECK macro of its own.
#include <catch2/catch.hpp>

using namespace xtrain;

namespace {

std::vector<int64_t> values(const torch::Tensor& t) {
  const auto flat = t.reshape({-1}).contiguous();
  return {flat.data_ptr<int64_t>(), flat.data_ptr<int64_t>() + flat.numel()};
}

// One row of tokens 1..8 whose targets are the next tokens, the 5th carrying none (a prompt's end).
data::MicroBatch row() {
  data::MicroBatch batch;
  batch.inputs = torch::arange(1, 9, torch::kInt64).unsqueeze(0);
  batch.targets = torch::arange(2, 10, torch::kInt64).unsqueeze(0);
  batch.targets[0][4] = data::kIgnoreIndex;
  batch.target_count = 7;
  return batch;
}

}  // namespace

TEST_CASE("context parts carry each depth's inputs and targets shifted over the whole row", "[train]") {
  // cp 2 head-tail: rank 0 holds positions 0, 1, 6, 7 and rank 1 positions 2..5.
  const auto whole = row();
  const auto first = train::context_part(whole, {2, 0, true, 2});
  const auto second = train::context_part(whole, {2, 1, true, 2});
  CHECK(values(first.inputs) == std::vector<int64_t>{1, 2, 7, 8});
  REQUIRE(first.inputs_ahead.size() == 2);
  REQUIRE(second.targets_ahead.size() == 2);
  // Position 1's token one ahead is position 2's, on the other rank; 0 past the row's end.
  CHECK(values(first.inputs_ahead[0]) == std::vector<int64_t>{2, 3, 8, 0});
  CHECK(values(second.inputs_ahead[1]) == std::vector<int64_t>{5, 6, 7, 8});
  CHECK(values(first.targets_ahead[0]) == std::vector<int64_t>{3, 4, 9, -100});
  CHECK(values(second.targets_ahead[0]) == std::vector<int64_t>{5, -100, 7, 8});
  CHECK(values(second.targets_ahead[1]) == std::vector<int64_t>{-100, 7, 8, 9});
  // The whole row's counts, on every rank: 7 targets, 6 one ahead, 5 two ahead.
  for (const auto* part : {&first, &second}) {
    CHECK(part->whole_target_count == 7);
    CHECK(part->whole_ahead_counts == std::vector<int64_t>{6, 5});
  }
  CHECK(first.target_count + second.target_count == 7);
}

TEST_CASE("without multi-token prediction a context part has no depths", "[train]") {
  const auto part = train::context_part(row(), {2, 0, true, 0});
  CHECK(part.inputs_ahead.empty());
  CHECK(part.targets_ahead.empty());
  CHECK(part.whole_target_count == 7);
}
