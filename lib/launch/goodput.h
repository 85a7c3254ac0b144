// `xtrain goodput RUN_DIR`: what a run's wall time went to, from the run's own records: the
// per-step step_s of metrics.jsonl (each step's last record, so a step done again after a
// restart counts once), and the wall times of its TensorBoard event files, one per session
// (train/event_file.h), which keep the steps a failed session did past its last checkpoint.
// Each interruption (a failure and its restart, or a stop and a later resume) costs the time
// without steps, from the interrupted session's last step to the start of the next session's
// first, and the steps past the checkpoint it resumed from, done once in vain.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace xtrain::launch {

struct Interruption {
  int64_t last_step = 0;     // the last step the interrupted session recorded
  int64_t resumed_from = 0;  // the checkpoint step the next session started from
  double lost_s = 0;         // the time without steps plus recomputed_s
  double recomputed_s = 0;   // step_s of the interrupted session's steps resumed_from + 1 .. last_step
};

struct Goodput {
  int64_t steps = 0;
  int sessions = 0;
  double wall_s = 0;        // the first session's start to the last session's last record
  double productive_s = 0;  // sum of step_s, each step once
  std::vector<Interruption> interruptions;
};

// Throws InputError naming the file and the fix when metrics.jsonl or the event files are
// missing or unreadable.
Goodput measure_goodput(const std::string& run_dir);

std::string goodput_report(const std::string& run_dir, const Goodput& goodput);

}  // namespace xtrain::launch
