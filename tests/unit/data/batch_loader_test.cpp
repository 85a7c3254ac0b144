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

// Polls until the condition holds or `seconds` pass: a loader that hangs fails here in seconds,
// not at ctest's timeout.
template <class Condition>
bool within_seconds(double seconds, Condition&& condition) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

TEST_CASE("the loader hands out steps in order and reads at most depth steps ahead", "[data][loader]") {
  std::atomic<int64_t> produced{0};
  BatchLoader loader(
      [&](int64_t step) {
        ++produced;
        return batch_of(step);
      },
      5, 12, 2);
  REQUIRE(within_seconds(5, [&] { return produced.load() == 2; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(produced.load() == 2);  // and no further while nothing is taken
  for (int64_t step = 5; step <= 12; ++step) {
    const auto batches = loader.next();
    REQUIRE(batches.size() == 1);
    CHECK(batches.front().target_count == step);
    CHECK(torch::equal(batches.front().inputs, torch::full({1, 4}, step, torch::kInt64)));
    // Taking a step lets the thread read one more, up to the last.
    CHECK(within_seconds(5, [&] { return produced.load() == std::min<int64_t>(step - 5 + 3, 8); }));
  }
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
  std::atomic<bool> destroyed{false};
  std::thread owner([&] {
    auto loader = std::make_unique<BatchLoader>([](int64_t step) { return batch_of(step); }, 1, 1000000, 2);
    CHECK(loader->next().front().target_count == 1);
    loader.reset();  // joins: must not hang on the full queue
    destroyed = true;
  });
  const bool in_time = within_seconds(5, [&] { return destroyed.load(); });
  if (!in_time) owner.detach();  // hung: fail now rather than at ctest's timeout
  else owner.join();
  REQUIRE(in_time);
}
