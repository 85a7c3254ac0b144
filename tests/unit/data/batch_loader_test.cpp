#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include <torch/torch.h>

#include "data/batch_loader.h"

using xtrain::data::BatchLoader;
using xtrain::data::MicroBatch;

namespace {

std::vector<MicroBatch> batch_of(int64_t step) {
  MicroBatch batch;
  batch.inputs = torch::full({1, 4}, step, torch::kInt64);
  batch.target_count = step;
  return {batch};
}

}  // namespace

TEST_CASE("the loader hands out steps in order and reads at most depth steps ahead", "[data][loader]") {
  std::atomic<int64_t> produced{0};
  BatchLoader loader(
      [&](int64_t step) {
        ++produced;
        return batch_of(step);
      },
      5, 12, 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(produced.load() == 2);
  for (int64_t step = 5; step <= 12; ++step) CHECK(loader.next().front().target_count == step);
  CHECK(produced.load() == 8);
  CHECK_THROWS_AS(loader.next(), std::logic_error);
}

TEST_CASE("the loader measures the wait for a slow producer and rethrows its error", "[data][loader]") {
  BatchLoader loader(
      [](int64_t step) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (step == 3) throw std::runtime_error("bad record in step 3");
        return batch_of(step);
      },
      1, 10, 1);
  loader.next();
  CHECK(loader.last_wait_seconds() > 0.02);
  CHECK(loader.last_read_seconds() > 0.04);
  loader.next();
  CHECK_THROWS_WITH(loader.next(), "bad record in step 3");
}

TEST_CASE("a loader destroyed early stops its thread", "[data][loader]") {
  auto loader = std::make_unique<BatchLoader>([](int64_t step) { return batch_of(step); }, 1, 1000000, 2);
  loader->next();
  loader.reset();  // joins: must not hang on the full queue
  SUCCEED();
}
