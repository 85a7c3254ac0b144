// TrainingStep: one optimizer step on this rank. The schedule runs the step's micro batches
// forward and backward through the ParallelModel, each micro batch's loss weighed by its share
// of the global batch's targets (train/micro_batch_weight.h), so that the gradients do not depend
// on the layout. Then the update: fp16 gradients unscaled (a step that overflowed is skipped and
// the loss scale shrinks), the global norm clipped, a step with a non-finite loss or norm or a
// loss spike skipped, else AdamW. Evaluation runs forwards through the same schedule.
// Figures that decide (the loss, the norm, overflow) are summed over all ranks first, so every
// rank takes the same decision.
#pragma once
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <c10/core/Device.h>

#include "data/micro_batch.h"
#include "optim/adamw.h"
#include "optim/loss_scaler.h"
#include "parallel/device_mesh.h"
#include "parallel/expert_parallel.h"
#include "parallel/parallel_model.h"
#include "train/dpo_loss.h"
#include "train/evaluate.h"
#include "train/expert_balance.h"
#include "train/fault_injection.h"
#include "train/grpo_clip_extrema.h"
#include "train/grpo_token_means.h"
#include "train/grpo_objective.h"
#include "train/non_finite_guard.h"
#include "train/rank_sums.h"
#include "train/schedule.h"
#include "train/spike_detector.h"

namespace xtrain::train {

struct StepSettings {
  config::Dtype dtype = config::Dtype::fp32;
  torch::Device device = torch::kCPU;
  int64_t loss_chunk = 0;        // tokens per chunk of the loss (memory.chunked_loss), 0: whole
  double grad_clip = 0;          // optim.grad_clip
  bool detect_spikes = false;    // train.spike skip | rollback
  int64_t max_skipped_steps = 5; // train.max_skipped_steps
  int64_t spike_window = 50;     // train.spike_window
  double spike_zscore = 6;       // train.spike_zscore
  bool chief = true;             // prints the step's skip messages
};

// What one step is asked to do.
struct StepInput {
  int64_t step = 0;
  double lr = 0;
  const std::vector<data::MicroBatch>* micro_batches = nullptr;
  double loss_factor = 1.0;                   // an injected spike (train/fault_injection.h)
  const std::optional<Fault>* fault = nullptr;  // the planned fault, for its mid-step actions
  const GrpoStepBatch* grpo = nullptr;          // data.objective grpo: the micro batches' rollout terms
};

// What one optimizer step did: for the log line, metrics.jsonl and the decisions after it.
struct StepOutcome {
  double loss = 0;
  double lr = 0;
  double grad_norm = std::numeric_limits<double>::quiet_NaN();
  double loss_scale = 1.0;
  double seconds = 0;
  double data_wait = 0;
  double data_read = 0;
  bool skipped = false;
  std::optional<Spike> spike;
  RankSpread busy;
  RankSpread peak_rss_mib;                    // each rank's peak resident memory so far
  RankSpread peak_device_mib;                 // each rank's peak of tensor memory on its device so far
  std::map<std::string, double> aux_losses;   // per target, over the global batch
  // data.objective dpo: per pair (train/dpo_loss.h); grpo: grpo_loss's, the mean over micro batches
  std::map<std::string, double> objective_metrics;
  std::optional<ExpertBalanceStats> experts;  // mixtures of experts
  parallel::CommSeconds comm;                 // blocked on collectives during the step
  int64_t gathered_bytes = 0;                 // received by the step's parameter gathers
  double context_cost_spread = 0;             // cp > 1: max / mean causal attention work of the cp ranks
  double pipeline_idle = 0;                   // seconds waiting on pipeline neighbours (pp > 1)
  double pipeline_in_flight = 0;              // most micro batches held at once (pp > 1)
  std::vector<double> stage_idle, stage_in_flight, stage_rss;  // by pipeline stage (pp > 1)
  Schedule::PassSeconds pipeline_passes;      // this rank's (pp > 1)
  std::vector<double> stage_forward, stage_backward, stage_weight;  // its seconds, by stage
  std::vector<double> stage_forward_cpu, stage_backward_cpu, stage_weight_cpu;  // their CPU time
  std::vector<double> stage_tensor_mib;  // the stage's peak tensor memory (device/device.h), by stage
};

class TrainingStep final : private MicroBatchWork {
 public:
  // `optimized`: this rank's pieces as the optimizer holds them (frozen ones marked).
  TrainingStep(parallel::ParallelModel& model, Schedule& schedule, optim::AdamW& optimizer,
               optim::DynamicLossScaler* loss_scaler, const std::vector<optim::NamedParameter>& optimized,
               ExpertBalance& experts, const parallel::DeviceMesh& mesh, RankSums& sums, StepSettings settings);

  StepOutcome run(const StepInput& input);
  // Loss, perplexity and (where measured) accuracy over `batches`, the same on every rank.
  EvalResult evaluate(const std::vector<data::MicroBatch>& batches);

  // data.objective dpo: every micro batch's loss is `objective`'s (its targets count pairs).
  void use_dpo(std::unique_ptr<DpoObjective> objective) { dpo_ = std::move(objective); }
  // data.objective grpo: every micro batch's loss is `objective`'s on StepInput::grpo's terms.
  void use_grpo(std::unique_ptr<GrpoObjective> objective) { grpo_ = std::move(objective); }
  // run.seed, which keys the dropout masks (train/dropout_key.h) of a model with model.dropout
  // or, with `adapters`, of its LoRA adapters (model.lora.dropout).
  void key_dropout(uint64_t seed, bool adapters) { dropout_seed_ = seed, adapters_drop_ = adapters; }

  const NonFiniteGuard& non_finite() const { return non_finite_; }
  int64_t spikes_in_a_row() const { return spikes_in_a_row_; }
  void forget_spikes() { spikes_in_a_row_ = 0; }  // after a rollback

 private:
  MicroBatchLosses forward_backward(const data::MicroBatch& batch, int64_t index, int64_t count) override;
  ChunkOutput forward_chunk(const parallel::PipelineChunk& part, const data::MicroBatch& batch, int64_t index,
                            int64_t count, const torch::Tensor& input) override;
  MicroBatchLosses forward(const data::MicroBatch& batch) override;
  ChunkOutput forward_chunk_only(const parallel::PipelineChunk& part, const data::MicroBatch& batch,
                                 const torch::Tensor& input) override;

  // The weights of the micro batch's loss and of its prediction depths' (train/training_loss.h).
  struct ChunkLossWeights {
    double loss = 1, depths = 1;
  };
  ChunkOutput run_chunk_layers(const parallel::PipelineChunk& part, const data::MicroBatch& batch,
                               const torch::Tensor& input, ChunkLossWeights weights, double loss_factor,
                               bool training);  // training: with the dropout masks
  double micro_batch_loss_weight(const data::MicroBatch& batch, int64_t index, int64_t count) const;
  static int64_t depth_targets(const data::MicroBatch& batch);  // the targets a depth's loss is a mean over
  double micro_batch_loss_weight(int64_t targets, int64_t index, int64_t count) const;  // of `targets` targets
  void sum_losses(const MicroBatchLosses& losses, StepOutcome& outcome);
  void update(StepOutcome& outcome);
  void report_stages(StepOutcome& outcome);

  parallel::ParallelModel& model_;
  Schedule& schedule_;
  optim::AdamW& optimizer_;
  optim::DynamicLossScaler* loss_scaler_;
  const std::vector<optim::NamedParameter>& optimized_;
  std::vector<torch::Tensor> trainable_;  // optimized_'s tensors that are not frozen
  ExpertBalance& experts_;
  const parallel::DeviceMesh& mesh_;
  RankSums& sums_;
  StepSettings settings_;
  // XTRAIN_HEALTH_FAULT=slow:R names this rank: each step takes 40 ms longer (train/health_check.h).
  bool slow_fault_ = false;
  // 1 on the ranks whose losses and target counts stand for their data rank's (tensor-parallel
  // rank 0 of the last pipeline stage, which computes the loss: its peers computed the same), else 0.
  double data_share_ = 1.0;
  // 1 on the ranks whose router losses stand for their data rank's layers: tensor-parallel rank 0
  // of every pipeline stage (each stage's are those of its layers).
  double aux_share_ = 1.0;

  std::unique_ptr<DpoObjective> dpo_;
  std::unique_ptr<GrpoObjective> grpo_;
  std::vector<torch::Tensor> clip_low_min_, clip_high_max_;  // grpo: each micro batch's, this step
  std::map<std::string, std::vector<torch::Tensor>> token_means_;  // grpo: each micro batch's (grpo_token_means.h)
  std::vector<torch::Tensor> completion_tokens_;                    // grpo: each micro batch's
  uint64_t dropout_seed_ = 0;
  bool adapters_drop_ = false;
  bool draws_dropout() { return model_.model().config().dropout > 0 || adapters_drop_; }
  NonFiniteGuard non_finite_;
  SpikeDetector spikes_;
  int64_t spikes_in_a_row_ = 0;

  // The step being computed: its input, the divisor of its loss (its targets over all ranks).
  StepInput input_;
  double step_targets_ = 0;
  double step_divisor_ = 0;
};

}  // namespace xtrain::train
