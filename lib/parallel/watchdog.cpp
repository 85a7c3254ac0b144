#include "parallel/watchdog.h"

#include <algorithm>
#include <vector>

#include <c10/util/Logging.h>
#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "parallel/comm.h"

namespace xtrain::parallel {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kBeatInterval = std::chrono::milliseconds(500);

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

std::string beat_key(const World& world, int64_t rank) {
  return fmt::format("xtrain/attempt_{}/heartbeat/{}", world.restart_count, rank);
}

// c10d logs a warning with a stack trace for every store call that meets a closed socket. The
// watchdog's calls expect that (the store's host died) and report it in one line, so c10's
// warnings are raised to errors while one is in flight. The level is process-wide: a warning
// from another thread in that window (a store round trip) would be lost too.
std::mutex quiet_mutex;
int quiet_depth = 0, saved_log_level = 0;

class QuietC10Warnings {
 public:
  QuietC10Warnings() {
    std::lock_guard<std::mutex> lock(quiet_mutex);
    if (quiet_depth++ == 0) {
      saved_log_level = FLAGS_caffe2_log_level;
      FLAGS_caffe2_log_level = std::max(saved_log_level, 2);  // 2: ERROR
    }
  }
  ~QuietC10Warnings() {
    std::lock_guard<std::mutex> lock(quiet_mutex);
    if (--quiet_depth == 0) FLAGS_caffe2_log_level = saved_log_level;
  }
  QuietC10Warnings(const QuietC10Warnings&) = delete;
  QuietC10Warnings& operator=(const QuietC10Warnings&) = delete;
};

}  // namespace

Watchdog::Watchdog(const ProcessGroups* groups, const World& world, double stall_s)
    : store_(groups ? groups->store() : nullptr), world_(world), stall_s_(stall_s), progress_ns_(now_ns()) {
  if (store_) {
    publish();
    set_peer_diagnosis([this] { return diagnose(); });
  }
  if (store_ || stall_s_ > 0) thread_ = std::thread([this] { run(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (store_) set_peer_diagnosis(nullptr);
}

void Watchdog::report_lost_store_host_when(std::function<bool()> told_to_stop) {
  std::lock_guard<std::mutex> lock(mutex_);
  told_to_stop_ = std::move(told_to_stop);
}

void Watchdog::step_done(int64_t step) {
  step_ = step;
  progress_ns_ = now_ns();
}

void Watchdog::publish() {
  if (store_gone_) return;
  const std::string value = fmt::format("{}|{}|{}", beats_++, step_.load(), last_collective());
  QuietC10Warnings quiet;
  try {
    store_->set(beat_key(world_, world_.rank), std::vector<uint8_t>(value.begin(), value.end()));
  } catch (const std::exception&) {
    // The store is gone (its host died): the collectives report that. No more beats, so that the
    // one warning c10d logged is not repeated twice a second until the launcher ends this rank.
    store_gone_ = true;
  }
}

void Watchdog::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  // A beat from the start: a peer's first read, one interval on, finds it however early this
  // rank dies after that.
  if (store_) publish();
  while (!wake_.wait_for(lock, kBeatInterval, [this] { return stopping_; })) {
    if (store_) publish();
    if (store_gone_ && store_host_is_a_rank() && told_to_stop_ && told_to_stop_())
      collective_failed(
          fmt::format("rank {} was told to stop, and the job's store is gone: {}", world_.rank, diagnose()));
    if (store_ && !store_gone_ && store_host_is_a_rank()) {
      const Beat host = read_beat(0);
      std::lock_guard<std::mutex> host_lock(host_beat_mutex_);
      if (host.count >= 0) host_beat_ = host;
    }
    const double idle_s = static_cast<double>(now_ns() - progress_ns_.load()) * 1e-9;
    if (stall_s_ <= 0 || idle_s < stall_s_) continue;
    collective_failed(fmt::format(
        "watchdog: rank {} completed no step for {:.0f} s (dist.watchdog_s={}), after step {}; its last "
        "collective: {}.{}{}",
        world_.rank, idle_s, stall_s_, step_.load(), last_collective(),
        store_ ? " Every rank: " + every_rank() + "." : std::string(), store_ ? " " + stalled_ranks() : std::string()));
  }
}

Watchdog::Beat Watchdog::read_beat(int64_t rank) const {
  Beat beat;
  QuietC10Warnings quiet;
  try {
    const std::string key = beat_key(world_, rank);
    if (!store_->check({key})) return beat;
    const auto bytes = store_->get(key);
    const std::string value(bytes.begin(), bytes.end());
    const auto first = value.find('|'), second = value.find('|', first + 1);
    beat.count = std::stoll(value.substr(0, first));
    beat.step = std::stoll(value.substr(first + 1, second - first - 1));
    beat.collective = value.substr(second + 1);
  } catch (const std::exception&) {
    beat.count = -2;  // unreadable: the store is gone
  }
  return beat;
}

std::string Watchdog::every_rank() const {
  std::string text;
  for (int64_t rank = 0; rank < world_.size; ++rank) {
    const Beat beat = read_beat(rank);
    text += fmt::format("{}rank {}: {}", rank ? "; " : "", rank,
                        beat.count < 0 ? std::string("no heartbeat")
                                       : fmt::format("after step {}, last collective {}", beat.step, beat.collective));
  }
  return text;
}

std::string Watchdog::diagnose() const {
  std::vector<Beat> before;
  for (int64_t rank = 0; rank < world_.size; ++rank) {
    before.push_back(read_beat(rank));
    if (before.back().count == -2) break;  // one failed call says it; each would log c10d's warning
  }
  if (before.back().count == -2) {
    if (!store_host_is_a_rank())
      return fmt::format("The job's store at {}:{} is gone too: the process that hosted it has died.",
                         world_.master_addr, world_.master_port);
    std::lock_guard<std::mutex> lock(host_beat_mutex_);
    return fmt::format("Rank 0 has died: the job's store it hosted at {}:{} is gone too{}.", world_.master_addr,
                       world_.master_port,
                       host_beat_.count < 0 ? std::string()
                                            : fmt::format("; its last heartbeat: after step {}, last collective {}",
                                                          host_beat_.step, host_beat_.collective));
  }
  const std::string dead = stopped_beats(before);
  if (dead.empty()) return "Every other rank's heartbeat goes on; one of them closed the connection on an error.";
  return fmt::format("Dead: {}; its heartbeat stopped. Its own output or the launcher's report names the cause.",
                     dead);
}

std::string Watchdog::stalled_ranks() const {
  std::vector<Beat> before;
  for (int64_t rank = 0; rank < world_.size; ++rank) before.push_back(read_beat(rank));
  if (before[0].count == -2) return "The job's store does not answer: the rank that hosts it is gone or stopped.";
  const std::string stopped = stopped_beats(before);
  if (stopped.empty()) return "Every rank's heartbeat goes on: the ranks wait on each other or on a stuck read.";
  return fmt::format("Stalled: {}; its heartbeat stopped (a stopped (SIGSTOP) or frozen process).", stopped);
}

// A live rank beats twice a second: a beat that does not move in three intervals has stopped.
std::string Watchdog::stopped_beats(const std::vector<Beat>& before) const {
  std::this_thread::sleep_for(3 * kBeatInterval);
  std::vector<std::string> stopped;
  for (int64_t rank = 0; rank < world_.size; ++rank) {
    if (rank == world_.rank) continue;
    const Beat after = read_beat(rank);
    if (after.count == before[static_cast<size_t>(rank)].count)
      stopped.push_back(
          fmt::format("rank {} (after step {}, last collective {})", rank, after.step, after.collective));
  }
  return fmt::format("{}", fmt::join(stopped, ", "));
}

}  // namespace xtrain::parallel
