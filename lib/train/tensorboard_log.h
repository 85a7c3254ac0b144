// The run's metrics as TensorBoard scalars, in run.dir/tensorboard (metrics.tensorboard): every
// numeric field of each metrics.jsonl record under its own name at the record's step (a list of
// numbers as name/0, name/1, ...), and the resolved recipe as text. A resumed run, and one that
// rolls back after a loss spike, restart the curve at their step (TensorBoard drops what the
// earlier session wrote from there on), so TensorBoard shows what metrics.jsonl's last record of
// each step says.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "train/event_file.h"

namespace xtrain::train {

class TensorBoardLog {
 public:
  // resume_step: the step this session continues after (0 for a fresh run).
  TensorBoardLog(const std::string& dir, int64_t resume_step, const std::string& recipe_yaml);

  // A metrics.jsonl record; one with "rollback_to" restarts the curve after that step.
  void write(const nlohmann::ordered_json& record);

 private:
  EventFile events_;
};

}  // namespace xtrain::train
