// BatchLoader: a background thread that reads the micro batches of the coming steps while the
// current step trains, at most `depth` steps ahead. next() hands them out in step order and
// records how long the training loop waited for them (0 when the loader keeps up). An error
// in the producer (bad data found late) is rethrown by the next() that would have returned
// that step. The producer runs on the loader thread only, so it may use state that is not
// thread-safe as long as nothing else touches it meanwhile.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "data/micro_batch.h"

namespace xtrain::data {

class BatchLoader {
 public:
  using Producer = std::function<std::vector<MicroBatch>(int64_t step)>;

  // Produces steps first_step .. last_step.
  BatchLoader(Producer produce, int64_t first_step, int64_t last_step, int64_t depth = 2);
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  std::vector<MicroBatch> next();
  // Seconds the last next() blocked.
  double last_wait_seconds() const { return last_wait_seconds_; }
  // Seconds the loader thread spent producing the step the last next() returned.
  double last_read_seconds() const { return last_read_seconds_; }

 private:
  void run();

  Producer produce_;
  const int64_t first_step_, last_step_;
  int64_t next_step_;  // the step next() returns
  size_t depth_;
  std::mutex mutex_;
  std::condition_variable changed_;
  struct ReadyStep {
    std::vector<MicroBatch> batches;
    double read_seconds;
  };
  std::deque<ReadyStep> ready_;
  std::exception_ptr error_;
  bool stopping_ = false;
  double last_wait_seconds_ = 0;
  double last_read_seconds_ = 0;
  std::thread thread_;  // last: starts once everything above exists
};

}  // namespace xtrain::data
