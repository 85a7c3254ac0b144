#include "parallel/comm.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <mutex>
#include <thread>

#include <torch/torch.h>

namespace xtrain::parallel {

namespace {
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
  if (failure_handler) {
    // One report per process: the handler ends it, and a second thread that fails meanwhile
    // (the watchdog's and a collective's view of the same dead peer) waits for that.
    static std::atomic<bool> reporting{false};
    if (reporting.exchange(true))
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    failure_handler(message);
  }
  throw CommError(message);
}

void BlockedClock::wait(PendingCollective& pending) {
  const auto started = std::chrono::steady_clock::now();
  pending.wait();
  add_since(started);
}

void BlockedClock::add_since(std::chrono::steady_clock::time_point started) {
  nanoseconds_ += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - started).count();
  ++waits_;
}

void PendingCollective::wait() {
  if (!wait_) return;
  auto wait = std::move(wait_);
  wait_ = nullptr;
  BlockedClock* clock = clock_;
  // A collective built from others (reduce-scatter from an all-reduce) waits on them inside its
  // own wait: only the outermost wait on this thread counts, or the time would count twice.
  thread_local int depth = 0;
  const bool outermost = depth == 0;
  ++depth;
  const auto started = std::chrono::steady_clock::now();
  auto account = [&] {
    --depth;
    if (outermost && clock) clock->add_since(started);
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
  PendingCollective all_to_all(torch::Tensor out, torch::Tensor in, std::vector<int64_t> out_splits,
                               std::vector<int64_t> in_splits) override {
    TORCH_CHECK(out.size(0) == in.size(0) && (out_splits.empty() || out_splits == std::vector<int64_t>{out.size(0)}) &&
                    (in_splits.empty() || in_splits == std::vector<int64_t>{in.size(0)}),
                "all_to_all on one rank: the splits must be [rows of in] (", in.size(0), ")");
    if (!out.is_same(in)) out.copy_(in);
    return {};
  }
  PendingCollective send_recv(const std::vector<PeerTransfer>& transfers) override {
    std::deque<torch::Tensor> sent;
    for (const auto& t : transfers) {
      TORCH_CHECK(t.peer == 0, "send_recv on one rank: peer ", t.peer, " is not in the group");
      if (t.kind == PeerTransfer::Kind::send) sent.push_back(t.tensor.clone());
    }
    for (const auto& t : transfers) {
      if (t.kind != PeerTransfer::Kind::recv) continue;
      TORCH_CHECK(!sent.empty(), "send_recv on one rank: a receive without a send to match it");
      t.tensor.copy_(sent.front().view(t.tensor.sizes()));
      sent.pop_front();
    }
    return {};
  }
  void barrier() override {}

 private:
  std::string name_;
};

}  // namespace

std::shared_ptr<Comm> make_single_process_comm(std::string name) {
  return std::make_shared<SingleProcessComm>(std::move(name));
}

torch::Tensor all_gather_along(Comm& comm, const torch::Tensor& x, int64_t dim) {
  auto rows = x.movedim(dim, 0).contiguous();
  auto sizes = rows.sizes().vec();
  sizes[0] *= comm.size();
  auto out = torch::empty(sizes, rows.options());
  comm.all_gather(out.view(-1), rows.view(-1)).wait();
  return out.movedim(0, dim).contiguous();
}

torch::Tensor reduce_scatter_along(Comm& comm, const torch::Tensor& x, int64_t dim) {
  auto rows = x.movedim(dim, 0).clone(torch::MemoryFormat::Contiguous);  // the collective clobbers its input
  TORCH_CHECK(rows.size(0) % comm.size() == 0, "reduce_scatter_along: dimension ", dim, " of size ", rows.size(0),
              " does not split over ", comm.size(), " ranks");
  auto sizes = rows.sizes().vec();
  sizes[0] /= comm.size();
  auto out = torch::empty(sizes, rows.options());
  comm.reduce_scatter_sum(out.view(-1), rows.view(-1)).wait();
  return out.movedim(0, dim).contiguous();
}

std::vector<PeerTransfer> deadlock_free_order(std::vector<PeerTransfer> transfers, int64_t rank) {
  auto position = [rank](const PeerTransfer& t) {
    const bool sends_first = rank <= t.peer;
    const bool is_send = t.kind == PeerTransfer::Kind::send;
    return std::make_pair(t.peer, is_send == sends_first ? 0 : 1);
  };
  std::stable_sort(transfers.begin(), transfers.end(),
                   [&](const PeerTransfer& a, const PeerTransfer& b) { return position(a) < position(b); });
  return transfers;
}

}  // namespace xtrain::parallel
