// Which launchers of a job are alive, and which of them run ranks in each attempt: the elastic
// side of `xtrain launch --nnodes MIN:MAX`, kept in the launchers' store (agent_store.h).
//
// Heartbeats: every launcher but node 0's adds to "beat/<node>" every heartbeat_s; node 0's
// launcher (which hosts the store, so its own loss is seen by every other launcher as the
// store's loss) notes when each count last moved. A node whose count has not moved for
// kMissedBeats heartbeats is lost: that happens at most kMissedBeats * heartbeat_s plus two of
// the launcher's polls after its launcher was killed or cut off, whatever its ranks do.
//
// Attempts: every launcher joins attempt k ("attempt/k/node/<node>"); node 0 names the members
// ("attempt/k/members", node 0 always first) once working_nodes(options) have joined, or, on a
// restart, once every live node has joined and at least MIN have. Members run ranks in the order
// of the list (group rank = index); the others wait as hot spares until the attempt ends. A
// node that starts late joins the attempt node 0 is in ("attempt").
//
// Growing back: when an attempt runs on fewer than working_nodes(options) (after a loss with no
// spare) and a node joins it late (a lost node's launcher started again), node 0 takes it in:
// the ranks stop after their next periodic checkpoint, node 0 marks the attempt regrouped, and
// the next attempt is named as usual, on the nodes now there. Regroups are not failures: they
// do not count against --max-restarts.
#pragma once
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "launch/agent_store.h"
#include "launch/launch_options.h"
#include "launch/rank_failure.h"

namespace xtrain::launch {

constexpr int kMissedBeats = 3;

class NodeMembership {
 public:
  using Clock = std::chrono::steady_clock;

  // Checks that this node has node 0's MIN, --active-nodes and --heartbeat (InputError, after
  // publishing an abort, when not), and publishes this node's host name.
  NodeMembership(AgentStore& store, const LaunchOptions& options);

  // Beats when due; on node 0 also reads the others' beats, noting (and printing) the nodes
  // lost and those back. Call at least every heartbeat_s / 2.
  void tick();

  // Node 0's view: a node is live from its first beat until kMissedBeats are missed.
  bool live(int node) const;
  bool lost(int node) const;
  // The failure node 0 publishes for a member it lost: names the node, its host and the silence.
  RankFailure lost_node_failure(int node) const;

  // The attempt node 0 is in, for a launcher starting now (once node 0 has moved past a failed
  // one, waiting at most --join-timeout); node 0 starts at 0.
  int first_attempt();
  void join(int attempt);
  // The attempt's members once named (node 0 names them when ready), else nullopt.
  std::optional<std::vector<int>> members(int attempt);
  // "N of M nodes joined": for the error when an attempt never fills.
  std::string joined_summary(int attempt);

  // A member's ranks all succeeded; the attempt succeeded once every member's have.
  void publish_success(int attempt);
  bool all_succeeded(int attempt, int members);

  // Node 0: the live nodes that joined the attempt after its members were named, when it runs
  // on fewer than the working nodes (empty otherwise, and on other nodes).
  std::vector<int> nodes_to_take_in(int attempt, const std::vector<int>& members);
  // Node 0, once its ranks stopped at the checkpoint it asked for, before publish_success, so
  // that every node that sees the attempt succeed sees this too.
  void publish_regrouped(int attempt);
  bool regrouped(int attempt);
  // The attempts so far that ended in a regroup, not a failure.
  int regroups();

  // Signs off; node 0 waits (at most timeout_s) until every live node has, so that the store
  // outlives their last calls.
  void leave(double timeout_s);

 private:
  struct Beat {
    int64_t count = 0;
    Clock::time_point moved;
    bool lost = false;
  };
  std::vector<int> joined(int attempt);
  bool ready(int attempt, const std::vector<int>& nodes);
  void watch_beats(Clock::time_point now);

  AgentStore& store_;
  LaunchOptions options_;
  Clock::time_point next_beat_;
  std::map<int, Beat> beats_;  // node 0: by node
};

// "0,2" and back.
std::string node_list_text(const std::vector<int>& nodes);
std::vector<int> parse_node_list(const std::string& text);

}  // namespace xtrain::launch
