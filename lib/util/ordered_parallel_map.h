// ordered_parallel_map: applies work() to a stream of items on `workers` threads and hands the
// results to consume() in the order the items came, so the output does not depend on the number
// of threads. next() (returning std::nullopt at the end) and consume() run on the calling
// thread; at most max_in_flight items are read ahead of the one being consumed, which bounds
// memory. An exception from next(), work() or consume() stops the workers and is rethrown
// here; from work() it surfaces at its item's turn, so the error reported is the first in input
// order, whatever the timing.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

namespace xtrain::util {

template <class Item, class Result, class Next, class Work, class Consume>
void ordered_parallel_map(int workers, size_t max_in_flight, Next&& next, Work&& work, Consume&& consume) {
  struct Outcome {
    std::optional<Result> result;
    std::exception_ptr error;
  };
  std::mutex mutex;
  std::condition_variable item_ready, outcome_ready;
  std::deque<std::pair<int64_t, Item>> queue;
  std::map<int64_t, Outcome> outcomes;
  bool closed = false, stopping = false;

  auto worker_loop = [&] {
    for (;;) {
      std::unique_lock<std::mutex> lock(mutex);
      item_ready.wait(lock, [&] { return stopping || closed || !queue.empty(); });
      if (stopping || queue.empty()) return;
      auto [index, item] = std::move(queue.front());
      queue.pop_front();
      lock.unlock();
      Outcome outcome;
      try {
        outcome.result.emplace(work(item));
      } catch (...) {
        outcome.error = std::current_exception();
      }
      lock.lock();
      outcomes.emplace(index, std::move(outcome));
      outcome_ready.notify_all();
    }
  };
  std::vector<std::thread> threads;
  // Joins on every way out, an exception included.
  struct Joiner {
    std::vector<std::thread>& threads;
    std::mutex& mutex;
    bool& stopping;
    std::condition_variable& item_ready;
    ~Joiner() {
      {
        std::lock_guard<std::mutex> lock(mutex);
        stopping = true;
      }
      item_ready.notify_all();
      for (auto& thread : threads) thread.join();
    }
  } joiner{threads, mutex, stopping, item_ready};
  for (int i = 0; i < (workers < 1 ? 1 : workers); ++i) threads.emplace_back(worker_loop);

  int64_t read = 0, consumed = 0;
  bool exhausted = false;
  for (;;) {
    while (!exhausted && static_cast<size_t>(read - consumed) < max_in_flight) {
      std::optional<Item> item = next();
      std::lock_guard<std::mutex> lock(mutex);
      if (!item) {
        exhausted = closed = true;
        item_ready.notify_all();
      } else {
        queue.emplace_back(read++, std::move(*item));
        item_ready.notify_one();
      }
    }
    if (exhausted && consumed == read) return;
    Outcome outcome;
    {
      std::unique_lock<std::mutex> lock(mutex);
      outcome_ready.wait(lock, [&] { return outcomes.count(consumed) > 0; });
      auto found = outcomes.find(consumed);
      outcome = std::move(found->second);
      outcomes.erase(found);
    }
    if (outcome.error) std::rethrow_exception(outcome.error);
    consume(std::move(*outcome.result));
    ++consumed;
  }
}

}  // namespace xtrain::util
