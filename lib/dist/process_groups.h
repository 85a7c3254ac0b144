// The job's rendezvous: one TCPStore (hosted by rank 0 at MASTER_ADDR:MASTER_PORT) from which
// named groups of processes are made. Each group is a c10d ProcessGroupGloo over a PrefixStore
// of its own, so only its members take part in creating it. Collectives of every group time out
// after `timeout`.
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "dist/comm.h"
#include "dist/world.h"

namespace xtrain::dist {

class ProcessGroups {
 public:
  ProcessGroups(const World& world, std::chrono::milliseconds timeout);
  ~ProcessGroups();
  ProcessGroups(const ProcessGroups&) = delete;
  ProcessGroups& operator=(const ProcessGroups&) = delete;

  // A group of the given global ranks, which must include this process's rank; every member
  // must call this with the same name and ranks.
  std::shared_ptr<Comm> make_group(const std::string& name, const std::vector<int64_t>& ranks);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace xtrain::dist
