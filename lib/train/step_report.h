// StepReport: what a run tells its user about its steps. Every step's figures go to
// metrics.jsonl (rank 0's, train/metrics_log.h); every train.log_every steps (and the first and
// last) a progress line: loss, learning rate, gradient norm, tokens/s over the interval, memory
// and the time left. At the end, the run's summary: state memory, rank imbalance, data waits.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <c10/core/Device.h>

#include "config/recipe.h"
#include "parallel/device_mesh.h"
#include "train/evaluate.h"
#include "train/metrics_log.h"
#include "train/non_finite_guard.h"
#include "train/slow_rank_watch.h"
#include "train/tensorboard_log.h"
#include "train/training_step.h"

namespace xtrain::train {

class StepReport {
 public:
  // last_step: where this session ends (--stop-at-step, else train.steps); epoch_samples: the
  // training data's samples (packed rows with data.pack) in one epoch, 0 when it has no epochs.
  StepReport(const config::Recipe& recipe, const parallel::ParallelDegrees& degrees, int64_t last_step,
             int64_t epoch_samples, torch::Device device, bool distributed, bool chief);

  // Rank 0 appends to run.dir/metrics.jsonl, dropping records after `resume_step`, and with
  // metrics.tensorboard to a new event file in run.dir/tensorboard (train/tensorboard_log.h).
  void open_metrics(int64_t resume_step, const std::string& recipe_yaml);
  // A record of another event (a checkpoint, a rollback) to both; rank 0 only, once open.
  void record(const nlohmann::ordered_json& record);

  // state_bytes: parameters, gradients and optimizer state held now (peak, gathers included).
  // samples_consumed: after this step, whose global batch is the train.global_batch_size samples
  // before it; the record says where they lie (data.position, data.epoch, data.offset), the same
  // on every layout, which `xtrain goodput` checks across restarts (launch/data_positions.h).
  void step(int64_t step, int64_t samples_consumed, const StepOutcome& outcome, int64_t state_bytes,
            const NonFiniteGuard& non_finite);
  void eval(int64_t step, const EvalResult& result);
  void finish(int64_t step, bool stopped_early);

 private:
  void write_metrics(int64_t step, int64_t samples_consumed, const StepOutcome& outcome,
                     const NonFiniteGuard& non_finite);
  void print_line(int64_t step, const StepOutcome& outcome);
  double device_mib() const;

  const config::Recipe& recipe_;
  parallel::ParallelDegrees degrees_;
  int64_t last_step_;
  int64_t epoch_samples_;
  int64_t tokens_per_step_;
  torch::Device device_;
  bool distributed_, chief_;
  std::optional<MetricsLog> metrics_;
  std::optional<TensorBoardLog> tensorboard_;
  SlowRankWatch slow_ranks_;
  int64_t warned_slow_rank_ = -1;  // the rank last warned of, until another is found

  int64_t steps_run_ = 0;  // in this process, rollbacks included
  double data_wait_total_ = 0;
  double imbalance_sum_ = 0;  // over steps: the slowest rank's busy time over the mean
  double interval_seconds_ = 0, session_seconds_ = 0;
  int64_t interval_steps_ = 0;
  int64_t peak_state_bytes_ = 0;
};

// "1h02m", "3m05s", "42s"; "12.3k", "1.20M" (tokens per second).
std::string format_duration(double seconds);
std::string format_rate(double tokens_per_s);

}  // namespace xtrain::train
