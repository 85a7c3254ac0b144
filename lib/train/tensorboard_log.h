// The run's metrics as TensorBoard scalars, in run.dir/tensorboard (metrics.tensorboard): every
// numeric field of each metrics.jsonl record under its own name at the record's step (a list of
// numbers as name/0, name/1, ...), and the resolved recipe as text. A resumed run, and one that
// rolls back after a loss spike, restart the curve at their step (TensorBoard drops what the
// earlier session wrote from there on), so TensorBoard shows what metrics.jsonl's last record of
// each step says.
// Metrics are not the model: a TensorBoard write that fails (a full disk) is warned of once on
// stderr, naming the file and the error, and the run goes on without TensorBoard (metrics.jsonl
// keeps every figure). What the run cannot use as its tensorboard folder is refused up front.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "train/event_file.h"

namespace xtrain::train {

class TensorBoardLog {
 public:
  // Before anything of the run is written: a symbolic link in the place of dir (a run writes
  // only into its own folder, as for run.dir) or a file there is an InputError naming the path
  // and the fix; a folder that cannot be made is a std::runtime_error naming it.
  static void check_folder(const std::string& dir);

  // resume_step: the step this session continues after (0 for a fresh run).
  TensorBoardLog(const std::string& dir, int64_t resume_step, const std::string& recipe_yaml);

  // A metrics.jsonl record; one with "rollback_to" restarts the curve after that step.
  void write(const nlohmann::ordered_json& record);

 private:
  // Runs one write; after a failure, warns and drops the event file.
  template <typename Write>
  void attempt(const Write& write);

  std::string dir_;
  std::optional<EventFile> events_;
};

}  // namespace xtrain::train
