#include "launch/launcher.h"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "launch/agent_store.h"
#include "launch/node_membership.h"
#include "launch/rank_environment.h"
#include "launch/rank_failure.h"
#include "launch/rank_process.h"
#include "launch/signal_pipe.h"
#include "util/exit_codes.h"
#include "util/input_error.h"

namespace xtrain::launch {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kPollInterval{100};
constexpr double kLeaveTimeoutS = 30;

struct AttemptResult {
  enum Kind { kSucceeded, kFailed, kSignalled, kAborted } kind = kSucceeded;
  int ranks = 0, stopped_ranks = 0;         // this node's ranks, and those that exited kExitStopped
  RankFailure root_cause;                   // kFailed
  std::vector<RankFailure> other_failures;  // kFailed: more ranks of this node that failed on their own
  int signal = 0;                           // kSignalled
  std::string abort_reason;                 // kAborted
  bool regrouped = false;                   // kSucceeded: stopped at a checkpoint to take in more nodes
};

bool stopped_cleanly(int wait_status) { return WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == kExitStopped; }

// A rank that saved and stopped on a signal or a STOP file has not failed: nothing restarts it.
bool failed(int wait_status) {
  return !WIFEXITED(wait_status) || (WEXITSTATUS(wait_status) != 0 && !stopped_cleanly(wait_status));
}

void notice(const std::string& text) { fmt::print(stderr, "launch: {}\n", text); }

std::string command_title(const LaunchOptions& options) {
  std::string title = fs::path(options.program).filename().string();
  for (const auto& argument : options.command) title += " " + argument;
  constexpr size_t kMaxTitle = 100;
  if (title.size() > kMaxTitle) title = title.substr(0, kMaxTitle - 3) + "...";
  return title;
}

// NAME=VALUE in an environment, in place of any entry of that name.
void set_variable(std::vector<std::string>& environment, const std::string& name, const std::string& value) {
  const std::string prefix = name + "=";
  environment.erase(std::remove_if(environment.begin(), environment.end(),
                                   [&](const std::string& entry) { return entry.rfind(prefix, 0) == 0; }),
                    environment.end());
  environment.push_back(prefix + value);
}

std::string make_temporary_dir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/xtrain-launch-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr)
    throw std::runtime_error(fmt::format("launch: cannot create a temporary folder {}", pattern));
  return pattern;
}

class Launcher {
 public:
  Launcher(const LaunchOptions& options, AgentStoreConnector connect_tcp)
      : options_(resolve_launch_options(options)),
        connect_tcp_(std::move(connect_tcp)),
        parent_environment_(current_environment()) {
    if (options_.log_dir.empty()) {
      files_dir_ = make_temporary_dir();
      temporary_files_dir_ = true;
    } else {
      std::error_code error;
      fs::create_directories(options_.log_dir, error);
      if (error)
        throw InputError(fmt::format("launch: --log-dir {}: cannot create it: {}", options_.log_dir, error.message()));
      files_dir_ = options_.log_dir;
    }
  }

  // The temporary folder goes when the launch ends, failed or not (failed launches would pile
  // up in /tmp); the report carries each rank's message, and --log-dir keeps the files.
  ~Launcher() {
    clear_ranks();  // kills and reaps any rank still running
    if (temporary_files_dir_) {
      std::error_code ignored;
      fs::remove_all(files_dir_, ignored);
    }
  }

  int run() {
    if (options_.nnodes > 1) notice(start_line());
    // Connected before signals are caught, so that Ctrl-C while waiting for node 0 just ends.
    store_ = connect_agent_store(options_, connect_tcp_);
    membership_ = std::make_unique<NodeMembership>(*store_, options_);
    signals_ = std::make_unique<SignalPipe>();
    if (defaults_omp_num_threads(parent_environment_, options_))
      notice(
          "OMP_NUM_THREADS=1 for each rank, as torchrun sets it when several ranks share a node; "
          "set OMP_NUM_THREADS to give each rank more threads");

    for (int attempt = membership_->first_attempt();; ++attempt) {
      const AttemptResult result = run_attempt(attempt);
      switch (result.kind) {
        case AttemptResult::kSucceeded:
          if (result.regrouped) {
            notice(fmt::format("attempt {} stopped at its checkpoint to take in the nodes that joined", attempt));
            continue;
          }
          leave();
          if (result.stopped_ranks == 0) return 0;
          notice("the ranks saved a checkpoint and stopped; run the same command to continue");
          return kExitStopped;
        case AttemptResult::kSignalled:
          leave();
          if (result.ranks > 0 && result.stopped_ranks == result.ranks) {
            notice(fmt::format("stopped by {}: every rank saved a checkpoint at the same step; run the same "
                               "command to continue (exit {})",
                               signal_name(result.signal), kExitStopped));
            return kExitStopped;
          }
          notice(fmt::format("stopped by {}", signal_name(result.signal)));
          return 128 + result.signal;
        case AttemptResult::kAborted:
          notice(fmt::format("stopped: {}", result.abort_reason));
          leave();
          return 1;
        case AttemptResult::kFailed: {
          // Bad input (a recipe, data or environment error) fails the same way on every attempt:
          // no restart, and the job exits 2 as its rank did.
          const bool bad_input = result.root_cause.signal == 0 && result.root_cause.exit_code == kExitBadInput;
          const int restarts = attempt - membership_->regroups();  // the same count on every node
          if (!bad_input && restarts < options_.max_restarts) {
            notice(fmt::format("attempt {} failed: {}; restarting every rank (restart {} of {})", attempt,
                               describe(result.root_cause), restarts + 1, options_.max_restarts));
            continue;
          }
          print_failure_report(result);
          leave();
          return bad_input ? kExitBadInput : kExitRuntimeFailure;
        }
      }
    }
  }

 private:
  std::string start_line() const {
    const int working = working_nodes(options_), fewest = fewest_nodes(options_);
    std::string elastic;
    if (working < options_.nnodes || fewest < working)
      elastic = fmt::format(" (attempts run on {} nodes, on at least {} after a loss; {} wait as spares)", working,
                            fewest, options_.nnodes - working);
    return fmt::format("node {} of {}{}, heartbeat {} s; the launchers meet at {}:{}, the ranks at {}:{}",
                       options_.node_rank, options_.nnodes, elastic, options_.heartbeat_s, options_.master_addr,
                       options_.master_port + 1, options_.master_addr, options_.master_port);
  }

  // Node 0 waits for the others to sign off; they may still be giving their ranks the grace period.
  // Error files in the temporary folder are removed with it: the report says so rather than
  // name a path that will not exist.
  void print_failure_report(const AttemptResult& result) const {
    auto root_cause = result.root_cause;
    auto others = result.other_failures;
    if (temporary_files_dir_) {
      const std::string removed = "<removed with the launch's temporary folder; --log-dir DIR keeps it>";
      root_cause.error_file = removed;
      for (auto& failure : others) failure.error_file = removed;
    }
    fmt::print(stderr, "{}", failure_report(command_title(options_), root_cause, others));
  }
  void leave() {
    membership_->leave(kLeaveTimeoutS + std::max(options_.stop_grace_s, options_.failure_grace_s));
    store_->leave(0);  // node 0 has waited for every live node already
  }

  AttemptResult run_attempt(int attempt) {
    AttemptResult result;
    const auto members = wait_for_nodes(attempt, result);
    if (!members) return result;
    members_ = *members;
    const auto place = std::find(members_.begin(), members_.end(), options_.node_rank);
    if (place == members_.end()) {  // a spare: it follows the attempt to its end, and joins the next one
      follow_attempt(attempt, result);
      return result;
    }
    // The ranks see the attempt's nodes only: a spare that took a lost node's place has the
    // lost node's group rank, and the world keeps its size.
    LaunchOptions layout = options_;
    layout.nnodes = static_cast<int>(members_.size());
    layout.node_rank = static_cast<int>(place - members_.begin());
    try {
      start_ranks(attempt, layout);
      watch_ranks(attempt, result);
    } catch (...) {
      // Lost store or a failed start: the ranks still get their grace period.
      if (!stopping_) begin_stop(SIGTERM, options_.failure_grace_s);
      while (any_running()) step(nullptr, nullptr);
      clear_ranks();
      throw;
    }
    result.ranks = static_cast<int>(ranks_.size());
    for (const auto& rank : ranks_) result.stopped_ranks += stopped_cleanly(rank->wait_status()) ? 1 : 0;
    clear_ranks();
    if (result.kind != AttemptResult::kSucceeded) return result;
    // Rank 0 removed the file when the ranks stopped for the regroup (train/regroup_request.h).
    if (regroup_asked_ && result.stopped_ranks == result.ranks && !fs::exists(regroup_file(attempt)))
      membership_->publish_regrouped(attempt);
    membership_->publish_success(attempt);
    follow_attempt(attempt, result);
    return result;
  }

  // Every node joins the attempt; node 0 names the members (node_membership.h) before any
  // starts its ranks. nullopt when a stop or an abort came first.
  std::optional<std::vector<int>> wait_for_nodes(int attempt, AttemptResult& result) {
    membership_->join(attempt);
    const auto deadline = Clock::now() + std::chrono::duration<double>(options_.join_timeout_s);
    while (true) {
      if (auto members = membership_->members(attempt)) {
        if (options_.nnodes > 1) announce_members(attempt, *members);
        return members;
      }
      if (auto reason = store_->published_abort()) {
        result.kind = AttemptResult::kAborted;
        result.abort_reason = *reason;
        return std::nullopt;
      }
      if (Clock::now() > deadline)
        throw std::runtime_error(fmt::format(
            "launch: only {} within {} s; start `xtrain launch --node-rank N` on every node with the same "
            "--nnodes, --master-addr and --master-port (or raise --join-timeout)",
            membership_->joined_summary(attempt), options_.join_timeout_s));
      if (take_stop_signal(result)) return std::nullopt;
    }
  }

  void announce_members(int attempt, const std::vector<int>& members) const {
    const auto place = std::find(members.begin(), members.end(), options_.node_rank);
    const std::string role =
        place == members.end()
            ? "this node waits as a spare"
            : fmt::format("this node is group rank {} (ranks {}..{})", place - members.begin(),
                          (place - members.begin()) * options_.nproc_per_node,
                          (place - members.begin() + 1) * options_.nproc_per_node - 1);
    notice(fmt::format("attempt {} runs on nodes {} ({} ranks); {}", attempt, node_list_text(members),
                       members.size() * options_.nproc_per_node, role));
  }

  // Node 0's launcher: a member whose launcher stopped beating fails the attempt, whatever its
  // ranks' peers have noticed yet.
  std::optional<RankFailure> lost_member() const {
    if (options_.node_rank != 0) return std::nullopt;
    for (size_t index = 0; index < members_.size(); ++index) {
      if (!membership_->lost(members_[index])) continue;
      RankFailure failure = membership_->lost_node_failure(members_[index]);
      failure.rank = static_cast<int>(index) * options_.nproc_per_node;
      return failure;
    }
    return std::nullopt;
  }

  // Without ranks running here (a spare, or a member whose ranks all succeeded): until every
  // member's ranks have succeeded, or a failure, an abort or a stop signal comes first. A
  // member lost meanwhile fails the attempt (node 0 names it; spares are never node 0).
  void follow_attempt(int attempt, AttemptResult& result) {
    while (!membership_->all_succeeded(attempt, static_cast<int>(members_.size()))) {
      if (auto lost = lost_member()) store_->publish_failure(attempt, *lost);
      if (auto failure = store_->published_failure(attempt)) {
        result.kind = AttemptResult::kFailed;
        result.root_cause = *failure;
        return;
      }
      if (auto reason = store_->published_abort()) {
        result.kind = AttemptResult::kAborted;
        result.abort_reason = *reason;
        return;
      }
      if (take_stop_signal(result)) return;
    }
    result.regrouped = membership_->regrouped(attempt);
  }

  // Node 0, while its ranks run: nodes that joined an attempt short of nodes are taken in at
  // the ranks' next periodic checkpoint, after which they stop (train/regroup_request.h).
  void take_in_joined_nodes(int attempt) {
    if (regroup_asked_) return;
    const auto nodes = membership_->nodes_to_take_in(attempt, members_);
    if (nodes.empty()) return;
    const std::string path = regroup_file(attempt);
    if (std::FILE* file = std::fopen(path.c_str(), "w")) {
      std::fclose(file);
    } else {
      throw std::runtime_error(fmt::format("launch: cannot create {}", path));
    }
    regroup_asked_ = true;
    notice(fmt::format("node{} {} joined attempt {} on {} of {} nodes: the ranks stop after their next checkpoint "
                       "(checkpoint.every) and the next attempt takes {} in",
                       nodes.size() == 1 ? "" : "s", node_list_text(nodes), attempt, members_.size(),
                       working_nodes(options_), nodes.size() == 1 ? "it" : "them"));
  }

  std::string regroup_file(int attempt) const { return fmt::format("{}/attempt_{}/regroup", files_dir_, attempt); }

  // Waits one poll interval for a signal; true when one asks to stop.
  bool take_stop_signal(AttemptResult& result) {
    for (int signal : wait_for_events(kPollInterval)) {
      result.kind = AttemptResult::kSignalled;
      result.signal = signal;
      publish_abort_quietly(signal);
      return true;
    }
    return false;
  }

  void publish_abort_quietly(int signal) {
    try {
      store_->publish_abort(fmt::format("node {}'s launcher received {}", options_.node_rank, signal_name(signal)));
    } catch (const std::exception&) {
      // The other nodes lose the store soon anyway, and stop then.
    }
  }

  void start_ranks(int attempt, const LaunchOptions& layout) {
    const std::string dir = fmt::format("{}/attempt_{}", files_dir_, attempt);
    std::error_code error;
    fs::create_directories(dir, error);
    if (error) throw std::runtime_error(fmt::format("launch: cannot create {}: {}", dir, error.message()));
    stopping_ = false;
    killed_ = false;
    regroup_asked_ = false;
    for (int local_rank = 0; local_rank < options_.nproc_per_node; ++local_rank) {
      const int rank = layout.node_rank * layout.nproc_per_node + local_rank;
      const std::string error_file = fmt::format("{}/rank_{}.error.json", dir, rank);
      ::unlink(error_file.c_str());  // a stale one from an earlier job would be misreported
      RankCommand command;
      command.rank = rank;
      command.local_rank = local_rank;
      command.program = options_.program;
      command.arguments = options_.command;
      command.environment = rank_environment(parent_environment_, layout, local_rank, attempt, error_file);
      set_variable(command.environment, kRegroupFileVariable, regroup_file(attempt));
      if (!options_.log_dir.empty()) command.log_path = fmt::format("{}/rank_{}.log", dir, rank);
      ranks_.push_back(std::make_unique<RankProcess>(command));
      error_files_.push_back(error_file);
    }
  }

  void watch_ranks(int attempt, AttemptResult& result) {
    auto next_store_poll = Clock::now();
    while (any_running()) {
      std::vector<RankFailure> failures;
      std::vector<int> signals;
      step(&failures, &signals);
      for (int signal : signals) on_stop_signal(signal, result);
      if (stopping_) continue;
      if (!failures.empty()) {
        result.kind = AttemptResult::kFailed;
        result.root_cause = store_->publish_failure(attempt, failures.front());
        for (const auto& failure : failures)
          if (failure.rank != result.root_cause.rank) result.other_failures.push_back(failure);
        begin_stop(SIGTERM, options_.failure_grace_s);
      } else if (Clock::now() >= next_store_poll) {
        next_store_poll = Clock::now() + 2 * kPollInterval;
        if (auto lost = lost_member()) store_->publish_failure(attempt, *lost);
        if (auto failure = store_->published_failure(attempt)) {
          notice(fmt::format("node {}: {}; stopping this node's ranks", failure->node_rank, describe(*failure)));
          result.kind = AttemptResult::kFailed;
          result.root_cause = *failure;
          begin_stop(SIGTERM, options_.failure_grace_s);
        } else if (auto reason = store_->published_abort()) {
          result.kind = AttemptResult::kAborted;
          result.abort_reason = *reason;
          begin_stop(SIGTERM, options_.stop_grace_s);  // a stop request, as if signalled here
        } else {
          take_in_joined_nodes(attempt);
        }
      }
    }
  }

  // A first SIGINT/SIGTERM/... goes to every rank; a second one kills them at once.
  void on_stop_signal(int signal, AttemptResult& result) {
    if (result.kind == AttemptResult::kSignalled) {
      for (auto& rank : ranks_) rank->signal_group(SIGKILL);
      killed_ = true;
      return;
    }
    notice(fmt::format("received {}; passing it to the ranks (SIGKILL in {} s, or at a second signal)",
                       signal_name(signal), options_.stop_grace_s));
    result.kind = AttemptResult::kSignalled;
    result.signal = signal;
    publish_abort_quietly(signal);
    begin_stop(signal, options_.stop_grace_s);
  }

  void begin_stop(int signal, double grace_s) {
    // Ranks that already ended are signalled too: processes they left in their group go.
    for (auto& rank : ranks_) rank->signal_group(signal);
    stopping_ = true;
    stop_deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(grace_s));
  }

  // One round: copies output, collects stop signals, reaps ended ranks (failures of the ranks
  // that ended on their own, not after being told to stop), and kills the ranks that outlived
  // their grace period.
  void step(std::vector<RankFailure>* failures, std::vector<int>* signals) {
    milliseconds timeout = kPollInterval;
    if (stopping_ && !killed_)
      timeout = std::clamp(std::chrono::duration_cast<milliseconds>(stop_deadline_ - Clock::now()), milliseconds(0),
                           kPollInterval);
    const auto arrived = wait_for_events(timeout);
    if (signals) *signals = arrived;
    for (size_t i = 0; i < ranks_.size(); ++i) {
      RankProcess& rank = *ranks_[i];
      if (!rank.reap() || !failed(rank.wait_status()) || stopping_ || failures == nullptr) continue;
      failures->push_back(observe_failure(rank.rank(), rank.local_rank(), options_.node_rank, rank.pid(),
                                          rank.wait_status(), error_files_[i]));
    }
    if (stopping_ && !killed_ && Clock::now() >= stop_deadline_) {
      for (auto& rank : ranks_)
        if (rank->running()) rank->signal_group(SIGKILL);
      killed_ = true;
    }
  }

  void clear_ranks() {
    ranks_.clear();
    error_files_.clear();
  }

  bool any_running() const {
    for (const auto& rank : ranks_)
      if (rank->running()) return true;
    return false;
  }

  // Waits up to timeout for rank output (copied as it comes) or a signal; returns the stop
  // signals that arrived (SIGCHLD only wakes the loop).
  std::vector<int> wait_for_events(milliseconds timeout) {
    // A store that failed once is not called again while the ranks are being stopped.
    if (!store_failed_) {
      try {
        membership_->tick();
      } catch (...) {
        store_failed_ = true;
        throw;
      }
    }
    std::vector<pollfd> fds{{signals_->fd(), POLLIN, 0}};
    std::vector<RankProcess*> owners{nullptr};
    for (auto& rank : ranks_)
      for (int fd : rank->output_fds()) {
        fds.push_back({fd, POLLIN, 0});
        owners.push_back(rank.get());
      }
    if (::poll(fds.data(), fds.size(), static_cast<int>(timeout.count())) > 0)
      for (size_t i = 1; i < fds.size(); ++i)
        if (fds[i].revents != 0) owners[i]->pump(fds[i].fd);
    std::vector<int> stop_signals;
    for (int signal : signals_->take())
      if (signal != SIGCHLD) stop_signals.push_back(signal);
    return stop_signals;
  }

  LaunchOptions options_;
  AgentStoreConnector connect_tcp_;
  std::vector<std::string> parent_environment_;
  std::string files_dir_;  // per attempt: error files, and logs with --log-dir
  bool temporary_files_dir_ = false;
  std::unique_ptr<AgentStore> store_;
  std::unique_ptr<NodeMembership> membership_;
  std::vector<int> members_;  // the nodes of the current attempt, in group-rank order
  bool store_failed_ = false;
  std::unique_ptr<SignalPipe> signals_;
  std::vector<std::unique_ptr<RankProcess>> ranks_;
  std::vector<std::string> error_files_;  // parallel to ranks_
  bool stopping_ = false;
  bool killed_ = false;
  bool regroup_asked_ = false;  // node 0: this attempt's ranks were asked to stop at a checkpoint
  Clock::time_point stop_deadline_;
};

}  // namespace

int run_launch(const LaunchOptions& options, const AgentStoreConnector& connect_tcp) {
  Launcher launcher(options, connect_tcp);
  return launcher.run();
}

}  // namespace xtrain::launch
