// Collectives over one named group of processes, on flat tensors. Every collective is started
// asynchronously and returns a PendingCollective; wait() completes it. A collective that fails or
// does not complete within the group's timeout throws CommError naming the collective, the group
// and the timeout, so a hung or dead peer ends the job with a message rather than a hang.
//
// Implementations: a single-process one (size 1: every collective is a copy) and one over a c10d
// backend, Gloo or NCCL (dist/process_groups.h).
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

#include <torch/types.h>

namespace xtrain::dist {

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

class PendingCollective {
 public:
  // Seconds this process has spent blocked in wait() so far: the communication that did not
  // overlap with compute.
  static double total_wait_seconds();

  PendingCollective() = default;  // already complete
  explicit PendingCollective(std::function<void()> wait) : wait_(std::move(wait)) {}
  // Blocks until the collective is complete; a no-op the second time.
  void wait();

 private:
  std::function<void()> wait_;
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
  virtual void barrier() = 0;
};

std::shared_ptr<Comm> make_single_process_comm(std::string name);

}  // namespace xtrain::dist
