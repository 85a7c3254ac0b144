// TrainingRun: one training process from its recipe to its exit code. The constructor sets up
// (training_run.cpp): data, model, mesh, the parallel layout (parallel/parallelize.h), optimizer,
// and the resumed checkpoint; run() (training_loop.cpp) then takes step after step
// (train/training_step.h), each followed by its report (train/step_report.h), the checks that
// stop a diverging run, checkpoints (train/run_state.h) and evaluation.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "config/recipe.h"
#include "data/batch_loader.h"
#include "data/batch_schedule.h"
#include "data/sample_dataset.h"
#include "text/tokenizer.h"
#include "optim/adamw.h"
#include "optim/loss_scaler.h"
#include "optim/lr_schedule.h"
#include "parallel/device_mesh.h"
#include "parallel/parallel_model.h"
#include "parallel/watchdog.h"
#include "parallel/world.h"
#include "train/checkpoint_writer.h"
#include "train/context_split.h"
#include "train/expert_balance.h"
#include "train/fault_injection.h"
#include "train/grpo_rollout.h"
#include "train/memory_checkpoints.h"
#include "train/model_factory.h"
#include "train/rank_sums.h"
#include "train/run_setup.h"
#include "train/run_state.h"
#include "train/schedule.h"
#include "train/spike_detector.h"
#include "train/step_report.h"
#include "train/trainer.h"
#include "train/training_step.h"

namespace xtrain::train {

// Where a run is, for the messages of failures that unwind out of it.
struct RunProgress {
  int64_t step = 0;
  torch::Device device = torch::kCPU;
};

class TrainingRun {
 public:
  TrainingRun(const config::Recipe& recipe, const TrainOptions& options, RunProgress& progress);
  int run();

 private:
  void check_layout();
  void load_data();
  void check_micro_batch_memory() const;
  void build_model();
  void parallelize_model();
  void make_optimizer();
  void make_muon(const optim::AdamWOptions& adamw_options);
  void freeze_parts();
  void print_lora_summary() const;
  void make_memory_checkpoints();
  ResumeFrom read_from_memory_or_disk();
  void resume();
  void check_resumed_schedule(const std::string& dir) const;
  void open_outputs();
  void print_summary() const;
  void print_data_summary() const;  // the samples of data.train (not grpo's prompts)
  void print_float8_line() const;

  StepOutcome train_step();
  // dist.health_check: the ranks and links checked (train/health_check.h) before the first step
  // and every N steps; a named rank stops the run or is warned of, as dist.health_action says.
  void check_health(int64_t at_step);
  void stop_if_diverging(const StepOutcome& outcome) const;
  bool handle_spike(const Spike& spike);
  bool roll_back(const Spike& spike);
  std::optional<int> checkpoint_evaluate_or_stop();
  int finish();
  void save(int64_t at_step);
  void run_eval(int64_t at_step);
  // This rank's part of each micro batch's rows under parallel.cp.
  ContextSplit context_split() const;
  void start_loader(int64_t from_step, int64_t from_position);
  // Parameters, gradients and optimizer state held by this rank now, and at the step's peak.
  int64_t state_bytes(bool peak = false) const;

  const config::Recipe& recipe_;
  const config::TrainSection& t_;
  const TrainOptions& options_;
  RunProgress& progress_;
  const parallel::World world_;
  const bool chief_;
  parallel::ParallelDegrees degrees_;
  int64_t data_ranks_ = 1;
  int64_t accumulation_ = 1;
  int64_t tokens_per_step_ = 0;
  int64_t last_step_ = 0;
  std::optional<Fault> fault_;
  std::optional<Fault> injected_spike_;  // its own copy: consumed when it fires, while a save reads fault_

  std::unique_ptr<text::Tokenizer> tokenizer_;
  std::unique_ptr<data::SampleDataset> train_data_;
  std::unique_ptr<data::SampleDataset> eval_data_;
  std::unique_ptr<GrpoRollouts> grpo_;  // data.objective grpo: its prompts and rollouts, instead of train_data_
  torch::Device device_ = torch::kCPU;
  std::unique_ptr<ckpt::CheckpointStore> store_;
  std::optional<ResumeFrom> resume_from_;
  double resume_read_s_ = 0;  // choosing, assembling, verifying and loading the checkpoint
  std::unique_ptr<MemoryCheckpoints> memory_;  // checkpoint.in_memory
  std::shared_ptr<model::CausalLM> model_;
  InitialWeights initial_weights_;
  // The config.json the model came from (model.init_from's, or the resumed checkpoint's, which
  // carries it on): checkpoints write it back with xtrain's fields over it (model/spec/hf_config.h).
  nlohmann::json imported_hf_config_;
  int64_t total_parameters_ = 0;
  int64_t loss_chunk_ = 0;
  std::unique_ptr<ExpertBalance> experts_;  // the expert loads, bias and balance figures

  std::optional<parallel::DeviceMesh> mesh_;
  std::unique_ptr<parallel::Watchdog> watchdog_;
  std::unique_ptr<RankSums> sums_;
  std::unique_ptr<parallel::ParallelModel> parallel_;
  std::unique_ptr<Schedule> schedule_;
  TrainedParameters trained_;
  std::unique_ptr<optim::AdamW> optimizer_;
  std::optional<optim::DynamicLossScaler> loss_scaler_;
  std::unique_ptr<TrainingStep> training_step_;
  std::unique_ptr<RunState> state_;
  std::unique_ptr<StepReport> report_;

  std::vector<std::string> resume_notices_;
  std::string recipe_yaml_;
  optim::LrSchedule lr_schedule_;
  std::unique_ptr<CheckpointWriter> checkpoints_;
  std::unique_ptr<data::BatchSchedule> batch_schedule_;
  std::optional<data::BatchLoader> loader_;  // restarted after a rollback, from the data after the spike
  int64_t rollbacks_to_latest_ = 0;
};

}  // namespace xtrain::train
