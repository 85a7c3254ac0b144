#include "launch/node_membership.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "util/input_error.h"

namespace xtrain::launch {
namespace {

std::string this_host() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

std::string attempt_key(int attempt, const std::string& name) { return fmt::format("attempt/{}/{}", attempt, name); }

// Node 0 publishes them just after the store's own settings, which the others have waited for.
std::optional<std::string> node0_settings(AgentStore& store) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  auto settings = store.value("elastic");
  while (!settings && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    settings = store.value("elastic");
  }
  return settings;
}

double seconds(NodeMembership::Clock::duration duration) { return std::chrono::duration<double>(duration).count(); }

}  // namespace

std::string node_list_text(const std::vector<int>& nodes) {
  std::string text;
  for (int node : nodes) text += (text.empty() ? "" : ",") + std::to_string(node);
  return text;
}

std::vector<int> parse_node_list(const std::string& text) {
  std::vector<int> nodes;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) nodes.push_back(std::stoi(item));
  return nodes;
}

NodeMembership::NodeMembership(AgentStore& store, const LaunchOptions& options)
    : store_(store), options_(options), next_beat_(Clock::now()) {
  // The elastic settings beside those the store itself compares (agent_store.h): a node that
  // counts beats or members differently would lose nodes that are there, or wait for none.
  const std::string settings =
      fmt::format("min {}, active {}, heartbeat {}", fewest_nodes(options), working_nodes(options), options.heartbeat_s);
  if (options.node_rank == 0) {
    store_.set_value("elastic", settings);
  } else if (const auto node0 = node0_settings(store_); node0 && *node0 != settings) {
    const std::string message = fmt::format(
        "launch: node {} has {} but node 0 has {}; every node needs the same --nnodes MIN:MAX, --active-nodes and "
        "--heartbeat",
        options.node_rank, settings, *node0);
    store_.publish_abort(message);
    throw InputError(message);
  }
  store_.set_value(fmt::format("host/{}", options.node_rank), this_host());
}

void NodeMembership::tick() {
  const auto now = Clock::now();
  if (options_.nnodes == 1) return;
  if (options_.node_rank != 0) {
    if (now < next_beat_) return;
    store_.add(fmt::format("beat/{}", options_.node_rank), 1);
    next_beat_ = now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.heartbeat_s));
    return;
  }
  watch_beats(now);
}

void NodeMembership::watch_beats(Clock::time_point now) {
  const auto silence_limit = std::chrono::duration<double>(kMissedBeats * options_.heartbeat_s);
  for (int node = 1; node < options_.nnodes; ++node) {
    const int64_t count = store_.add(fmt::format("beat/{}", node), 0);
    auto [entry, first_seen] = beats_.try_emplace(node, Beat{0, now, false});
    Beat& beat = entry->second;
    if (count != beat.count) {
      if (beat.lost)
        std::fprintf(stderr, "launch: node %d beats again (%.3f s since it was lost)\n", node, seconds(now - beat.moved));
      beat = Beat{count, now, false};
    } else if (!beat.lost && beat.count > 0 && now - beat.moved > silence_limit) {
      beat.lost = true;
      std::fprintf(stderr, "launch: node %d lost: no heartbeat for %.2f s (%d missed at %g s) at unix time %.3f\n",
                   node, seconds(now - beat.moved), kMissedBeats, options_.heartbeat_s,
                   std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
    }
    (void)first_seen;
  }
}

bool NodeMembership::live(int node) const {
  if (node == options_.node_rank) return true;
  const auto found = beats_.find(node);
  return found != beats_.end() && found->second.count > 0 && !found->second.lost;
}

bool NodeMembership::lost(int node) const {
  const auto found = beats_.find(node);
  return found != beats_.end() && found->second.lost;
}

RankFailure NodeMembership::lost_node_failure(int node) const {
  RankFailure failure;
  failure.node_lost = true;
  failure.node_rank = node;
  failure.host = store_.value(fmt::format("host/{}", node)).value_or("unknown host");
  failure.exit_code = 1;
  failure.time = static_cast<int64_t>(std::time(nullptr));
  const auto found = beats_.find(node);
  const double silent = found == beats_.end() ? 0 : seconds(Clock::now() - found->second.moved);
  failure.error = ErrorRecord{
      fmt::format("its launcher sent no heartbeat for {:.2f} s ({} missed at {} s): killed, or cut off from node 0",
                  silent, kMissedBeats, options_.heartbeat_s),
      "", failure.time};
  return failure;
}

int NodeMembership::first_attempt() {
  if (options_.node_rank == 0) {
    store_.set_value("attempt", "0");
    return 0;
  }
  // A failed attempt is over, though node 0 may not have joined the next yet: joining it would
  // start ranks for members named before this node was lost.
  const auto deadline = Clock::now() + std::chrono::duration<double>(options_.join_timeout_s);
  while (true) {
    const auto current = store_.value("attempt");
    const int attempt = current ? std::stoi(*current) : 0;
    if (!store_.published_failure(attempt) || Clock::now() > deadline) return attempt;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void NodeMembership::join(int attempt) {
  if (options_.node_rank == 0) store_.set_value("attempt", std::to_string(attempt));
  store_.set_value(attempt_key(attempt, fmt::format("node/{}", options_.node_rank)), "joined");
}

std::vector<int> NodeMembership::joined(int attempt) {
  std::vector<int> nodes;
  for (int node = 0; node < options_.nnodes; ++node)
    if (store_.value(attempt_key(attempt, fmt::format("node/{}", node)))) nodes.push_back(node);
  return nodes;
}

// The first attempt waits for the working nodes, as a plain --nnodes N waits for N; a restart
// goes on with the live nodes once they have all joined, if they are at least MIN.
bool NodeMembership::ready(int attempt, const std::vector<int>& nodes) {
  const int count = static_cast<int>(nodes.size());
  if (count >= working_nodes(options_)) return true;
  if (attempt == 0 || count < fewest_nodes(options_)) return false;
  for (int node = 1; node < options_.nnodes; ++node)
    if (live(node) && std::find(nodes.begin(), nodes.end(), node) == nodes.end()) return false;
  return true;
}

std::optional<std::vector<int>> NodeMembership::members(int attempt) {
  const std::string key = attempt_key(attempt, "members");
  if (options_.nnodes == 1) return std::vector<int>{0};
  if (options_.node_rank != 0) {
    const auto named = store_.value(key);
    if (!named) return std::nullopt;
    return parse_node_list(*named);
  }
  auto nodes = joined(attempt);
  if (!ready(attempt, nodes)) return std::nullopt;
  nodes.resize(std::min<size_t>(nodes.size(), static_cast<size_t>(working_nodes(options_))));
  store_.set_value(key, node_list_text(nodes));
  return nodes;
}

std::vector<int> NodeMembership::nodes_to_take_in(int attempt, const std::vector<int>& members) {
  std::vector<int> nodes;
  if (options_.node_rank != 0 || static_cast<int>(members.size()) >= working_nodes(options_)) return nodes;
  for (int node : joined(attempt))
    if (live(node) && std::find(members.begin(), members.end(), node) == members.end()) nodes.push_back(node);
  return nodes;
}

void NodeMembership::publish_regrouped(int attempt) {
  store_.set_value(attempt_key(attempt, "regrouped"), "regrouped");
  store_.add("regroups", 1);
}

bool NodeMembership::regrouped(int attempt) { return store_.value(attempt_key(attempt, "regrouped")).has_value(); }

int NodeMembership::regroups() { return static_cast<int>(store_.add("regroups", 0)); }

std::string NodeMembership::joined_summary(int attempt) {
  const auto nodes = joined(attempt);
  return fmt::format("{} of {} nodes joined attempt {} (nodes {}; {} needed to start, at least {} on a restart)",
                     nodes.size(), options_.nnodes, attempt, nodes.empty() ? "none" : node_list_text(nodes),
                     working_nodes(options_), fewest_nodes(options_));
}

void NodeMembership::publish_success(int attempt) { store_.add(attempt_key(attempt, "succeeded"), 1); }

bool NodeMembership::all_succeeded(int attempt, int members) {
  return store_.add(attempt_key(attempt, "succeeded"), 0) >= members;
}

void NodeMembership::leave(double timeout_s) {
  try {
    store_.set_value(fmt::format("left/{}", options_.node_rank), "left");
    if (options_.node_rank != 0) return;
    const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
    while (Clock::now() < deadline) {
      watch_beats(Clock::now());
      bool waiting = false;
      for (int node = 1; node < options_.nnodes; ++node)
        waiting = waiting || (live(node) && !store_.value(fmt::format("left/{}", node)));
      if (!waiting) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  } catch (const std::exception&) {
    // Node 0 has already closed the store: nothing is left to sign off from.
  }
}

}  // namespace xtrain::launch
