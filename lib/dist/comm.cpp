#include "dist/comm.h"

#include <atomic>
#include <chrono>
#include <mutex>

#include <torch/torch.h>

namespace xtrain::dist {

namespace {
std::atomic<int64_t> waited_nanoseconds{0};
CollectiveFailureHandler failure_handler;
std::mutex last_collective_mutex;
std::string last_collective_description = "none yet";
PeerDiagnosis peer_diagnosis;
}  // namespace

void note_collective(const std::string& description) {
  std::lock_guard<std::mutex> lock(last_collective_mutex);
  last_collective_description = description;
}

std::string last_collective() {
  std::lock_guard<std::mutex> lock(last_collective_mutex);
  return last_collective_description;
}

void set_peer_diagnosis(PeerDiagnosis diagnosis) { peer_diagnosis = std::move(diagnosis); }

std::string diagnose_peers() { return peer_diagnosis ? peer_diagnosis() : ""; }

void set_collective_failure_handler(CollectiveFailureHandler handler) { failure_handler = std::move(handler); }

void collective_failed(const std::string& message) {
  if (failure_handler) failure_handler(message);
  throw CommError(message);
}

double PendingCollective::total_wait_seconds() { return static_cast<double>(waited_nanoseconds.load()) * 1e-9; }

void PendingCollective::wait() {
  if (!wait_) return;
  auto wait = std::move(wait_);
  wait_ = nullptr;
  // A collective built from others (reduce-scatter from an all-reduce) waits on them inside its
  // own wait: only the outermost wait on this thread counts, or the time would count twice.
  thread_local int depth = 0;
  const bool outermost = depth == 0;
  ++depth;
  const auto started = std::chrono::steady_clock::now();
  auto account = [&] {
    --depth;
    if (!outermost) return;
    waited_nanoseconds +=
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - started).count();
  };
  try {
    wait();
  } catch (...) {
    account();
    throw;
  }
  account();
}

namespace {

class SingleProcessComm : public Comm {
 public:
  explicit SingleProcessComm(std::string name) : name_(std::move(name)) {}
  int64_t rank() const override { return 0; }
  int64_t size() const override { return 1; }
  const std::string& name() const override { return name_; }

  PendingCollective all_gather(torch::Tensor out, torch::Tensor in) override {
    if (!out.is_same(in)) out.copy_(in);
    return {};
  }
  PendingCollective reduce_scatter_sum(torch::Tensor out, torch::Tensor in) override {
    if (!out.is_same(in)) out.copy_(in);
    return {};
  }
  PendingCollective all_reduce_sum(torch::Tensor) override { return {}; }
  PendingCollective broadcast(torch::Tensor, int64_t) override { return {}; }
  void barrier() override {}

 private:
  std::string name_;
};

}  // namespace

std::shared_ptr<Comm> make_single_process_comm(std::string name) {
  return std::make_shared<SingleProcessComm>(std::move(name));
}

}  // namespace xtrain::dist
