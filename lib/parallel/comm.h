// Collectives over one named group of processes, on flat tensors. Every collective is started
// asynchronously and returns a PendingCollective; wait() completes it. A collective that fails or
// does not complete within the group's timeout throws CommError naming the collective, the group
// and the timeout, so a hung or dead peer ends the job with a message rather than a hang.
//
// Implementations: a single-process one (size 1: every collective is a copy) and one over a c10d
// backend, Gloo or NCCL (parallel/process_groups.h).
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/types.h>

namespace xtrain::parallel {

class CommError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What happens when a collective fails or times out: the handler (none by default) is called with
// the message, then CommError is thrown. The xtrain executable installs one that reports the
// error and ends the process at once: unwinding would tear down process groups whose peer is
// gone, which can block for another timeout per queued collective.
using CollectiveFailureHandler = std::function<void(const std::string& message)>;
void set_collective_failure_handler(CollectiveFailureHandler handler);
[[noreturn]] void collective_failed(const std::string& message);

// The collective this process started last, "all_gather on group 'fsdp' (ranks 0,1)", for the
// watchdog's report of where each rank is.
void note_collective(const std::string& description);
std::string last_collective();

// When a peer's connection closes, which rank died and where it was: the watchdog, which reads
// every rank's heartbeat, installs the diagnosis. Empty when none is installed.
using PeerDiagnosis = std::function<std::string()>;
void set_peer_diagnosis(PeerDiagnosis diagnosis);
std::string diagnose_peers();

class PendingCollective;

// The time a family of collectives spent blocked waiting for their data (what compute did not
// hide) and how many waits it took. Each group has one (Comm::blocked); expert exchanges keep
// their own by direction.
class BlockedClock {
 public:
  void wait(PendingCollective& pending);  // pending.wait(), timed here as well
  void add_since(std::chrono::steady_clock::time_point started);  // one wait, from `started`
  double seconds() const { return static_cast<double>(nanoseconds_.load()) * 1e-9; }
  int64_t waits() const { return waits_.load(); }

 private:
  std::atomic<int64_t> nanoseconds_{0}, waits_{0};
};

class PendingCollective {
 public:
  PendingCollective() = default;  // already complete
  // `clock`, when given, counts the time wait() blocks: the group's clock, for what its
  // collectives did not overlap with compute.
  PendingCollective(std::function<void()> wait, BlockedClock* clock) : wait_(std::move(wait)), clock_(clock) {}
  // Blocks until the collective is complete; a no-op the second time.
  void wait();

 private:
  std::function<void()> wait_;
  BlockedClock* clock_ = nullptr;
};

// One transfer of a batch of point-to-point operations: send `tensor` to `peer`, or receive into
// it from `peer` (ranks within the group). Transfers with different tags are separate streams:
// between two ranks, a receive matches the oldest send of its own tag.
struct PeerTransfer {
  enum class Kind { send, recv };
  Kind kind;
  torch::Tensor tensor;
  int64_t peer;
  int64_t tag = 0;
};

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int64_t rank() const = 0;  // within this group
  virtual int64_t size() const = 0;
  virtual const std::string& name() const = 0;

  // out [size * n] <- every rank's in [n], in rank order.
  virtual PendingCollective all_gather(torch::Tensor out, torch::Tensor in) = 0;
  // out [n] <- the sum over ranks of in[rank * n, (rank + 1) * n). `in` [size * n] is clobbered.
  virtual PendingCollective reduce_scatter_sum(torch::Tensor out, torch::Tensor in) = 0;
  // t <- the sum over ranks of t.
  virtual PendingCollective all_reduce_sum(torch::Tensor t) = 0;
  // t <- root's t.
  virtual PendingCollective broadcast(torch::Tensor t, int64_t root) = 0;
  // Rows (dim 0) to and from every rank: in's rows are split by in_splits[r] (sent to rank r),
  // out's by out_splits[r] (received from rank r); an empty split list means equal parts. Rank
  // s's in_splits[r] must equal rank r's out_splits[s]; zero is allowed.
  virtual PendingCollective all_to_all(torch::Tensor out, torch::Tensor in, std::vector<int64_t> out_splits,
                                       std::vector<int64_t> in_splits) = 0;
  // Starts every transfer of the batch, in an order that cannot deadlock whatever the peers
  // post (with each peer, the lower rank sends first); wait() completes them all. Transfers
  // between the same two ranks match in the order they are given.
  virtual PendingCollective send_recv(const std::vector<PeerTransfer>& transfers) = 0;
  virtual void barrier() = 0;

  // Seconds this process has spent blocked waiting on the group's collectives so far.
  double blocked_seconds() const { return blocked_.seconds(); }
  // How many of the group's collectives this process has waited on so far.
  int64_t blocked_waits() const { return blocked_.waits(); }

 protected:
  // A collective of this group that is complete once `wait` returns, timed by the group's clock.
  PendingCollective timed(std::function<void()> wait) { return PendingCollective(std::move(wait), &blocked_); }

 private:
  BlockedClock blocked_;
};

// Along a tensor dimension, over `comm` (both complete before returning):
// the concatenation of every rank's x along dim, in rank order;
torch::Tensor all_gather_along(Comm& comm, const torch::Tensor& x, int64_t dim);
// this rank's part (1/size of dim) of the sum over ranks of x; dim must divide evenly.
torch::Tensor reduce_scatter_along(Comm& comm, const torch::Tensor& x, int64_t dim);

// The order send_recv issues a batch in: grouped by peer, and with each peer the lower rank's
// sends before its receives, the higher rank's receives before its sends.
std::vector<PeerTransfer> deadlock_free_order(std::vector<PeerTransfer> transfers, int64_t rank);

std::shared_ptr<Comm> make_single_process_comm(std::string name);

}  // namespace xtrain::parallel
