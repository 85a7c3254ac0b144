// An in-process Comm: N ranks as N threads of one process, for unit tests of everything that
// communicates (FSDP over several ranks, all-to-all, pipelines) in milliseconds and without
// sockets. Each collective completes when every rank has called it (the last to arrive computes
// it for all, in rank order, so results are deterministic); point-to-point transfers go through
// per-pair mailboxes. The ranks must call the same collectives in the same order with matching
// sizes, as with a real backend; unlike one, a mismatch is reported at once ("rank 1 called
// all_gather of 6 elements while rank 0 called reduce_scatter of 6"), to every rank, as a
// CommError, and a rank that does not arrive within `timeout` is named in one.
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "parallel/comm.h"

namespace xtrain::parallel {

// The Comms of one group of `size` ranks: element r is rank r's, to be used from its own thread.
std::vector<std::shared_ptr<Comm>> make_thread_comms(int64_t size, std::string name,
                                                     std::chrono::milliseconds timeout = std::chrono::seconds(30));

// The groups of a world of threads, made on request as a DeviceMesh asks for them
// (GroupFactory): the first member to ask for a group (by name and ranks) makes it for all of
// its members, each of which gets its own rank's Comm.
class ThreadWorld {
 public:
  explicit ThreadWorld(std::chrono::milliseconds timeout = std::chrono::seconds(30)) : timeout_(timeout) {}
  std::shared_ptr<Comm> make_group(int64_t caller, const std::string& name, const std::vector<int64_t>& ranks);

 private:
  std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::map<std::pair<std::string, std::vector<int64_t>>, std::vector<std::shared_ptr<Comm>>> groups_;
};

}  // namespace xtrain::parallel
