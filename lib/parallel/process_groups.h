// The job's rendezvous: one TCPStore (hosted by rank 0 at MASTER_ADDR:MASTER_PORT) from which
// named groups of processes are made. Each group is a c10d backend (ProcessGroupGloo for CPU
// tensors, ProcessGroupNCCL for CUDA tensors) over a PrefixStore of its own, so only its members take part in creating it. Collectives of every group time out
// after `timeout`.
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <c10/util/intrusive_ptr.h>

#include "parallel/comm.h"
#include "parallel/world.h"

namespace c10d {
class Backend;
class Store;
}  // namespace c10d

namespace xtrain::parallel {

enum class CommBackend { gloo, nccl };

class ProcessGroups {
 public:
  // nccl without the CUDA paths compiled in is an InputError. Returns once every rank has joined;
  // a rank missing after join_timeout ends the job with an error that names it.
  ProcessGroups(const World& world, std::chrono::milliseconds timeout, CommBackend backend = CommBackend::gloo,
                std::chrono::milliseconds join_timeout = std::chrono::minutes(5));
  ~ProcessGroups();
  ProcessGroups(const ProcessGroups&) = delete;
  ProcessGroups& operator=(const ProcessGroups&) = delete;

  // A group of the given global ranks, which must include this process's rank; every member
  // must call this with the same name and ranks.
  std::shared_ptr<Comm> make_group(const std::string& name, const std::vector<int64_t>& ranks);
  // The job's store, for the watchdog's heartbeats.
  c10::intrusive_ptr<c10d::Store> store() const;
  // Which network Gloo's connections use and why, for the start-up log: "Gloo on interface
  // veth0 (192.0.2.1), the route to MASTER_ADDR 192.0.2.1". GLOO_SOCKET_IFNAME (else
  // NCCL_SOCKET_IFNAME) names the interface; without either, the route to MASTER_ADDR picks it.
  // Empty with NCCL, which picks its own.
  const std::string& network() const;

 private:
  void wait_for_every_rank(std::chrono::milliseconds join_timeout);
  c10::intrusive_ptr<c10d::Backend> make_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size);

  struct State;
  std::unique_ptr<State> state_;
};

// A Comm over an existing c10d backend (its rank and size are the group's), whose collectives
// fail after `timeout` like those of make_group.
std::shared_ptr<Comm> make_backend_comm(c10::intrusive_ptr<c10d::Backend> backend, std::string name,
                                        std::vector<int64_t> ranks, std::chrono::milliseconds timeout);

}  // namespace xtrain::parallel
