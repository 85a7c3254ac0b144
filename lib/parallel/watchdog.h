// A heartbeat per rank, and a watchdog over the steps. A thread publishes this rank's heartbeat
// to the job's store twice a second: a beat count, the last completed step and the collective it
// started last. It ends the job when no step has completed for stall_s seconds (dist.watchdog_s),
// printing every rank's last step and collective first, so a hang outside any collective (a stuck
// read, a deadlock) also ends with a message. When a peer's connection closes, the heartbeats tell
// which rank died: the one whose beat stopped (parallel::diagnose_peers). When the store itself
// is gone, the rank that hosted it (rank 0, unless a launcher's agent hosts it) has died: every
// other rank keeps its last beat, read once an interval, to report that rank's step and collective.
// A stall names the ranks whose beat stopped (a SIGSTOPped rank). c10d's warnings about the
// store's closed socket are kept quiet: the one-line message says what they would. A rank told to
// stop (report_lost_store_host_when) whose store's host is gone reports that rank dead from this
// thread at once: its next collective, which would report it, may come after the launcher's
// SIGKILL (a long checkpoint write, a stalled step).
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <c10/util/intrusive_ptr.h>

#include "parallel/process_groups.h"
#include "parallel/world.h"

namespace c10d {
class Store;
}  // namespace c10d

namespace xtrain::parallel {

class Watchdog {
 public:
  // groups: the job's (null for one process: no heartbeats, only the stall check). stall_s 0: no
  // stall check.
  Watchdog(const ProcessGroups* groups, const World& world, double stall_s);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // A step completed (or a long step-boundary task, a checkpoint or an evaluation, did).
  void step_done(int64_t step);

  // `told_to_stop` (called from the heartbeat thread) says this rank was asked to stop and has not
  // finished stopping, as after the launcher's SIGTERM when another rank failed: then a lost
  // store hosted by rank 0 means rank 0 died, and is reported at once. Unset, or false at the end
  // of a run (rank 0 may leave first), a lost store waits for a collective to report it.
  void report_lost_store_host_when(std::function<bool()> told_to_stop);

 private:
  struct Beat {
    int64_t count = -1, step = 0;
    std::string collective;
  };
  void run();
  void publish();
  Beat read_beat(int64_t rank) const;
  std::string every_rank() const;  // "rank 0: after step 12, in all_reduce ...; rank 1: ..."
  std::string diagnose() const;    // which ranks' heartbeats stopped
  std::string stalled_ranks() const;  // the ranks whose heartbeat stopped, for the stall message
  std::string stopped_beats(const std::vector<Beat>& before) const;  // "rank 1 (after step 3, ...)", or ""
  bool store_host_is_a_rank() const { return !world_.agent_store && world_.rank != 0; }

  c10::intrusive_ptr<c10d::Store> store_;
  World world_;
  double stall_s_;
  std::atomic<int64_t> step_{0};
  std::atomic<int64_t> progress_ns_;  // steady_clock time of the last step_done
  int64_t beats_ = 0;
  bool store_gone_ = false;  // a beat failed: the store's host died; c10d logs each failure with a trace
  std::function<bool()> told_to_stop_;  // set before the thread reads it: guarded by mutex_
  mutable std::mutex host_beat_mutex_;
  Beat host_beat_;  // rank 0's last beat, when rank 0 hosts the store
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace xtrain::parallel
