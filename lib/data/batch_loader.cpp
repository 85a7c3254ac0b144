#include "data/batch_loader.h"

#include <chrono>
#include <stdexcept>

namespace xtrain::data {

BatchLoader::BatchLoader(Producer produce, int64_t first_step, int64_t last_step, int64_t depth)
    : produce_(std::move(produce)),
      first_step_(first_step),
      last_step_(last_step),
      next_step_(first_step),
      depth_(static_cast<size_t>(std::max<int64_t>(1, depth))),
      thread_([this] { run(); }) {}

BatchLoader::~BatchLoader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void BatchLoader::run() {
  for (int64_t step = first_step_; step <= last_step_; ++step) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || ready_.size() < depth_; });
      if (stopping_) return;
    }
    std::vector<MicroBatch> batches;
    const auto started = std::chrono::steady_clock::now();
    try {
      batches = produce_(step);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      error_ = std::current_exception();
      changed_.notify_all();
      return;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::lock_guard<std::mutex> lock(mutex_);
    ready_.push_back({std::move(batches), seconds});
    changed_.notify_all();
  }
}

std::vector<MicroBatch> BatchLoader::next() {
  const auto started = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  if (next_step_ > last_step_) throw std::logic_error("BatchLoader::next() past the last step");
  changed_.wait(lock, [&] { return !ready_.empty() || error_; });
  last_wait_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (ready_.empty()) std::rethrow_exception(error_);
  auto batches = std::move(ready_.front().batches);
  last_read_seconds_ = ready_.front().read_seconds;
  ready_.pop_front();
  ++next_step_;
  changed_.notify_all();
  return batches;
}

}  // namespace xtrain::data
