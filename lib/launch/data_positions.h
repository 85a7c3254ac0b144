// Whether a run consumed its data as one uninterrupted run would: every step 1..N once, and
// step s reading the global batch that follows step s - 1's (data.position and data.samples of
// each step's record in metrics.jsonl, train/step_report.h), whatever restarts, resumes and
// layout changes happened in between. A resume keeps the records up to its checkpoint and
// appends the steps done again, so the file's last record of each step is the one that counts;
// a train.spike rollback record (rollback_to, skipped_samples) drops the steps after its
// checkpoint and skips exactly the samples it names, which is not a fault.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace xtrain::launch {

struct DataPositions {
  int64_t steps = 0;          // steps with a data position
  int64_t last_step = 0;      // the highest step recorded
  int64_t end_position = 0;   // the sample after the last step's batch
  int64_t rollback_skips = 0; // samples skipped on purpose by rollbacks
  // One line per fault: a step missing, recorded twice, or reading other samples than the one
  // after the previous step's batch (skipped or repeated samples). Empty when the run is whole.
  std::vector<std::string> faults;
};

// Reads run_dir/metrics.jsonl; throws InputError naming the file (and line) when it is missing
// or not JSON records. A run without data positions (one written before they were logged)
// counts 0 steps and no faults.
DataPositions check_data_positions(const std::string& run_dir);

// "data: steps 1..24 read samples 0..191 in order, none skipped or repeated", or the faults.
std::string data_positions_report(const DataPositions& positions);

}  // namespace xtrain::launch
