#include <catch2/catch.hpp>

#include <chrono>
#include <map>
#include <string>
#include <thread>

#include "launch/node_membership.h"
#include "util/input_error.h"

using namespace xtrain::launch;
using Catch::Matchers::Contains;

namespace {

// One store that every node's membership shares, as the launchers share node 0's TCP store.
class SharedStore : public AgentStore {
 public:
  RankFailure publish_failure(int attempt, const RankFailure& failure) override {
    return failures_.emplace(attempt, failure).first->second;
  }
  std::optional<RankFailure> published_failure(int attempt) override {
    const auto found = failures_.find(attempt);
    if (found == failures_.end()) return std::nullopt;
    return found->second;
  }
  void publish_abort(const std::string& reason) override { abort_ = reason; }
  std::optional<std::string> published_abort() override { return abort_; }
  void set_value(const std::string& key, const std::string& value) override { values_[key] = value; }
  std::optional<std::string> value(const std::string& key) override {
    const auto found = values_.find(key);
    if (found == values_.end()) return std::nullopt;
    return found->second;
  }
  int64_t add(const std::string& key, int64_t amount) override { return counters_[key] += amount; }
  void leave(double) override {}

 private:
  std::map<int, RankFailure> failures_;
  std::optional<std::string> abort_;
  std::map<std::string, std::string> values_;
  std::map<std::string, int64_t> counters_;
};

LaunchOptions node(int rank, const std::string& nnodes, int active) {
  LaunchOptions options;
  options.nproc_per_node = 1;
  parse_nnodes(nnodes, options);
  options.node_rank = rank;
  options.active_nodes = active;
  options.heartbeat_s = 0.05;
  return options;
}

void run_for(double seconds, std::vector<NodeMembership*> nodes) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    for (auto* membership : nodes) membership->tick();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

TEST_CASE("node membership: --nnodes MIN:MAX", "[launch]") {
  LaunchOptions options;
  parse_nnodes("2:3", options);
  CHECK(options.min_nnodes == 2);
  CHECK(options.nnodes == 3);
  CHECK(fewest_nodes(options) == 2);
  CHECK(working_nodes(options) == 3);
  parse_nnodes("4", options);
  CHECK(fewest_nodes(options) == 4);
  CHECK(working_nodes(options) == 4);
  CHECK_THROWS_WITH(parse_nnodes("3:2", options), Contains("--nnodes 3:2: MIN is above MAX"));
  CHECK_THROWS_WITH(parse_nnodes("2:", options), Contains("expected N or MIN:MAX"));
  CHECK_THROWS_WITH(parse_nnodes("0", options), Contains("expected N or MIN:MAX"));
}

TEST_CASE("node membership: a spare takes a lost node's place; without one the rest go on", "[launch]") {
  SharedStore store;
  const bool spare = GENERATE(true, false);
  NodeMembership node0(store, node(0, spare ? "2:3" : "1:2", 2));
  NodeMembership node1(store, node(1, spare ? "2:3" : "1:2", 2));
  std::optional<NodeMembership> node2;
  if (spare) node2.emplace(store, node(2, "2:3", 2));
  std::vector<NodeMembership*> all{&node0, &node1};
  if (spare) all.push_back(&*node2);

  node0.join(0);
  CHECK_FALSE(node0.members(0));  // the first attempt waits for the working nodes
  node1.join(0);
  run_for(0.06, all);
  REQUIRE(node0.members(0) == std::vector<int>{0, 1});
  CHECK(node1.members(0) == std::vector<int>{0, 1});
  if (spare) {
    CHECK(node2->first_attempt() == 0);
    node2->join(0);
    CHECK(node2->members(0) == std::vector<int>{0, 1});  // not among them: a spare
  }
  CHECK(node0.live(1));

  // Node 1 vanishes: node 0 loses it after 3 missed beats (0.15 s), not before.
  all.erase(all.begin() + 1);
  run_for(0.08, all);
  CHECK_FALSE(node0.lost(1));
  run_for(0.2, all);
  CHECK(node0.lost(1));
  const RankFailure failure = node0.lost_node_failure(1);
  CHECK(failure.node_lost);
  CHECK_THAT(describe(failure), Contains("node 1 (") && Contains("was lost: its launcher sent no heartbeat for"));
  CHECK(failure_from_json_text(to_json_text(failure)).node_lost);

  node0.join(1);
  if (spare) node2->join(1);
  REQUIRE(node0.members(1) == (spare ? std::vector<int>{0, 2} : std::vector<int>{0}));
  if (spare) CHECK(node2->members(1) == std::vector<int>{0, 2});
}

TEST_CASE("node membership: a restart waits for every live node, and never goes below MIN", "[launch]") {
  SharedStore store;
  NodeMembership node0(store, node(0, "2:3", 3));
  NodeMembership node1(store, node(1, "2:3", 3));
  run_for(0.06, {&node0, &node1});
  node0.join(1);
  CHECK_FALSE(node0.members(1));  // node 1 beats but has not joined
  node1.join(1);
  CHECK(node0.members(1) == std::vector<int>{0, 1});  // 2 >= MIN, and node 2 never beat
}

TEST_CASE("node membership: nodes that count differently stop the job", "[launch]") {
  SharedStore store;
  NodeMembership node0(store, node(0, "2:3", 2));
  CHECK_THROWS_WITH(NodeMembership(store, node(1, "2:3", 3)),
                    Contains("node 1 has min 2, active 3, heartbeat 0.05 but node 0 has min 2, active 2"));
  CHECK(store.published_abort());
}

TEST_CASE("node membership: a lost node back is taken in by the next attempt", "[launch]") {
  SharedStore store;
  NodeMembership node0(store, node(0, "1:2", 2));
  std::optional<NodeMembership> node1;
  node1.emplace(store, node(1, "1:2", 2));
  node0.join(0);
  node1->join(0);
  run_for(0.06, {&node0, &*node1});
  REQUIRE(node0.members(0) == std::vector<int>{0, 1});
  CHECK(node0.nodes_to_take_in(0, {0, 1}).empty());  // the attempt has its working nodes
  run_for(0.25, {&node0});  // node 1 lost
  store.publish_failure(0, node0.lost_node_failure(1));
  node0.join(1);
  REQUIRE(node0.members(1) == std::vector<int>{0});

  // Its launcher again: it joins the attempt running on node 0 alone, which takes it in.
  node1.emplace(store, node(1, "1:2", 2));
  CHECK(node1->first_attempt() == 1);
  node1->join(1);
  CHECK(node1->members(1) == std::vector<int>{0});  // a spare until then
  CHECK(node0.nodes_to_take_in(1, {0}).empty());   // not beating yet
  run_for(0.06, {&node0, &*node1});
  CHECK(node0.live(1));
  CHECK(node0.nodes_to_take_in(1, {0}) == std::vector<int>{1});
  CHECK(node1->nodes_to_take_in(1, {0}).empty());  // node 0 decides
  CHECK_FALSE(node1->regrouped(1));
  node0.publish_regrouped(1);
  CHECK(node1->regrouped(1));
  CHECK(node1->regroups() == 1);
  node0.join(2);
  node1->join(2);
  CHECK(node0.members(2) == std::vector<int>{0, 1});
}
