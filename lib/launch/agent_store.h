// How the launchers of one job, one per node, agree on when to start, stop and restart
// their ranks. With one node every answer is local. With several, node 0's launcher hosts a
// small TCP store on MASTER_PORT + 1, leaving MASTER_PORT to the ranks' own store (the store
// is c10d's, so it comes from outside this torch-free library: parallel/tcp_agent_store.h),
// and for each attempt k:
//   - every launcher joins attempt k, and the members named for it start their ranks
//     (heartbeats and membership: node_membership.h, on this store's plain values);
//   - the first launcher to see a rank fail publishes that failure (compare-and-set, so the
//     first one wins); every launcher polls for it, stops its ranks, and then all of them
//     restart together (attempt k + 1) or, with no restarts left, all give up;
//   - a launcher whose ranks all succeeded waits until every member has succeeded (or a failure
//     elsewhere makes the group restart);
//   - a launcher stopped by a signal publishes an abort, and the others stop their ranks too.
// At the end every launcher signs off; node 0 keeps the store up until all that still beat have.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "launch/launch_options.h"
#include "launch/rank_failure.h"

namespace xtrain::launch {

class AgentStore {
 public:
  virtual ~AgentStore() = default;

  // Publishes this node's failure of the attempt unless a failure was published first;
  // returns the one that counts.
  virtual RankFailure publish_failure(int attempt, const RankFailure& failure) = 0;
  virtual std::optional<RankFailure> published_failure(int attempt) = 0;

  // Asks every node to stop for good; reason says why, for the other launchers to print.
  virtual void publish_abort(const std::string& reason) = 0;
  virtual std::optional<std::string> published_abort() = 0;

  // Plain values, for the launchers' heartbeats and per-attempt membership (node_membership.h):
  // value() does not wait (nullopt when the key is unset); add() returns the sum after adding.
  virtual void set_value(const std::string& key, const std::string& value) = 0;
  virtual std::optional<std::string> value(const std::string& key) = 0;
  virtual int64_t add(const std::string& key, int64_t amount) = 0;

  // Signs off. Node 0 waits until all nodes have (at most timeout_s) before its store closes.
  virtual void leave(double timeout_s) = 0;
};

// Connects to (or, on node 0, hosts) the launchers' TCP store, waiting up to
// options.join_timeout_s for node 0. Every node must be given the same --nnodes,
// --nproc-per-node, --max-restarts and --run-id: a node that differs from node 0 publishes an
// abort and throws InputError. Failures of the store itself are std::runtime_error naming its
// address.
using AgentStoreConnector = std::function<std::unique_ptr<AgentStore>(const LaunchOptions&)>;

// A local store for one node; for several, the store connect_tcp connects to.
std::unique_ptr<AgentStore> connect_agent_store(const LaunchOptions& options, const AgentStoreConnector& connect_tcp);

}  // namespace xtrain::launch
