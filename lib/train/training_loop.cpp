#include "train/training_run.h"

#include <chrono>

#include <fmt/format.h>
#include <torch/torch.h>

#include "model/spec/hf_config.h"
#include "model/spec/lora_config.h"
#include "data/micro_batch.h"
#include "train/context_split.h"
#include "train/evaluate.h"
#include "train/health_check.h"
#include "train/regroup_request.h"
#include "train/resume_check.h"
#include "train/stop_signal.h"
#include "util/exit_codes.h"
#include "util/input_error.h"
#include "util/signal_names.h"

namespace xtrain::train {

namespace {

constexpr const char* kPersistentSpikes =
    "the loss has moved to a new level or the run is diverging. Raise train.spike_zscore or train.spike_window, or "
    "set train.spike: off";

using Clock = std::chrono::steady_clock;

}  // namespace

int TrainingRun::run() {
  if (options_.setup_only) {
    if (chief_) fmt::print("set up; --setup-only: no training, nothing written\n");
    mesh_->group(parallel::Dim::world)->barrier();
    return 0;
  }
  if (state_->step >= last_step_) {
    if (chief_)
      fmt::print("nothing to do: the checkpoint is at step {} and the run ends at step {}\n", state_->step, last_step_);
    mesh_->group(parallel::Dim::world)->barrier();
    return 0;
  }
  const int64_t health_every = config::health_interval(recipe_.dist.health_check);
  if (health_every >= 0) check_health(state_->step);
  if (t_.eval_at_start && state_->step == 0) run_eval(0);
  if (recipe_.checkpoint.at_start && state_->step == 0) save(0);
  if (!grpo_)
    batch_schedule_ = std::make_unique<data::BatchSchedule>(
      *train_data_, t_.global_batch_size,
      data::BalanceOptions{recipe_.data.balance_window, recipe_.data.pack, static_cast<uint64_t>(recipe_.run.seed)});
  start_loader(state_->step + 1, state_->samples_consumed);
  model_->train();
  while (state_->step < last_step_) {
    const StepOutcome outcome = train_step();
    report_->step(state_->step, state_->samples_consumed, outcome, state_bytes(/*peak=*/true),
                  training_step_->non_finite());
    stop_if_diverging(outcome);
    if (outcome.spike && handle_spike(*outcome.spike)) continue;  // rolled back
    if (health_every > 0 && state_->step % health_every == 0 && state_->step < last_step_) check_health(state_->step);
    if (auto exit_code = checkpoint_evaluate_or_stop()) return *exit_code;
  }
  return finish();
}

void TrainingRun::check_health(int64_t at_step) {
  HealthOptions options;
  options.slow_fraction = recipe_.dist.health_slow_fraction;
  const auto report = train::check_health(*mesh_, device_, options);
  const auto problems = report.problems(options);
  if (chief_) {
    if (at_step == 0 || !problems.empty()) fmt::print("health check at step {}:\n{}", at_step, report.table());
    nlohmann::ordered_json record = {{"step", at_step}, {"health.matmul_gflops_median", report.median_gflops}};
    std::vector<int64_t> slow, differs;
    for (const auto& r : report.ranks) {
      if (r.slow) slow.push_back(r.rank);
      if (r.wrong_result) differs.push_back(r.rank);
    }
    record["health.slow_ranks"] = slow;
    record["health.result_differs"] = differs;
    for (const auto& link : report.links)
      record["health." + link.group + "." + link.collective + "_bus_gbps"] = link.bus_gbps;
    for (const auto& latency : report.latencies)
      record["health." + latency.group + ".latency_beside_compute_ms"] = 1e3 * latency.beside_compute_s;
    report_->record(record);
  }
  if (problems.empty()) return;
  const std::string joined = fmt::format("{}", fmt::join(problems, "; "));
  if (recipe_.dist.health_action == config::HealthAction::stop)
    throw std::runtime_error(fmt::format("health check at step {}: {}; stopping (dist.health_action: stop; warn goes "
                                         "on)",
                                         at_step, joined));
  if (chief_) fmt::print(stderr, "warning: health check at step {}: {}\n", at_step, joined);
}

// The next global batch's share of this rank, from the loader, through the step.
StepOutcome TrainingRun::train_step() {
  const auto started = Clock::now();
  const parallel::CommSeconds comm_before = parallel_->comm_seconds();
  const int64_t gathered_before = parallel_->gathered_bytes();
  const int64_t step = ++state_->step;
  progress_.step = step;
  inject_fault(fault_, step);
  StepInput input;
  input.step = step;
  input.lr = lr_schedule_.at(step);
  input.loss_factor = take_injected_spike(injected_spike_, step);
  input.fault = &fault_;
  parallel_->zero_grad();
  std::map<std::string, double> rollout_metrics;
  std::vector<data::MicroBatch> micro_batches;
  if (grpo_) {
    input.grpo = &grpo_->step_batch(step, *parallel_, *sums_, {mesh_->data_rank(), data_ranks_, t_.micro_batch_size},
                                    rollout_metrics);
    for (const auto& micro : input.grpo->micro) micro_batches.push_back(micro.batch);
  } else {
    micro_batches = loader_->next();
  }
  input.micro_batches = &micro_batches;
  StepOutcome outcome = training_step_->run(input);
  outcome.objective_metrics.insert(rollout_metrics.begin(), rollout_metrics.end());
  if (loader_) {
    outcome.data_wait = loader_->last_wait_seconds();
    outcome.data_read = loader_->last_read_seconds();
  }
  state_->samples_consumed += t_.global_batch_size;
  outcome.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  outcome.comm = parallel_->comm_seconds() - comm_before;
  outcome.gathered_bytes = parallel_->gathered_bytes() - gathered_before;
  return outcome;
}

void TrainingRun::stop_if_diverging(const StepOutcome& outcome) const {
  if (training_step_->non_finite().exhausted()) {
    throw std::runtime_error(fmt::format(
        "steps {}-{}: {} steps in a row had a non-finite loss or gradient norm (train.max_skipped_steps); the "
        "run is diverging. Likely causes: optim.lr too high (now {:g}){}{}, or corrupt data in the samples of "
        "these steps. {}",
        training_step_->non_finite().first_of_run(), state_->step, training_step_->non_finite().in_a_row(), recipe_.optim.lr,
        recipe_.optim.grad_clip > 0 ? "" : ", no gradient clipping (optim.grad_clip 0)",
        t_.dtype == config::Dtype::fp16 ? ", fp16 overflow (bf16 has fp32's range)" : "",
        newest_finite_checkpoint_note(*store_)));
  }
  if (outcome.spike && t_.spike == config::Spike::rollback && rollbacks_to_latest_ >= t_.max_skipped_steps)
    throw std::runtime_error(fmt::format(
        "step {}: {}, and the run has rolled back to the same checkpoint {} time{} already (train.spike "
        "rollback, train.max_skipped_steps {}): {}",
        state_->step, outcome.spike->describe(), rollbacks_to_latest_, rollbacks_to_latest_ == 1 ? "" : "s",
        t_.max_skipped_steps, kPersistentSpikes));
}

// True when the run rolled back to its last checkpoint; otherwise the step stays skipped.
bool TrainingRun::handle_spike(const Spike& spike) {
  if (t_.spike == config::Spike::rollback && roll_back(spike)) {
    ++rollbacks_to_latest_;
    watchdog_->step_done(state_->step);
    return true;
  }
  if (training_step_->spikes_in_a_row() >= t_.max_skipped_steps)
    throw std::runtime_error(fmt::format(
        "steps {}-{}: {} loss spikes in a row, the last: {} (train.spike {}, train.max_skipped_steps {}): {}",
        state_->step - training_step_->spikes_in_a_row() + 1, state_->step, training_step_->spikes_in_a_row(),
        spike.describe(), to_string(t_.spike), t_.max_skipped_steps, kPersistentSpikes));
  if (chief_)
    fmt::print("step {}: loss spike: {}; step skipped, no update{}\n", state_->step, spike.describe(),
               t_.spike == config::Spike::rollback ? " (no checkpoint to roll back to yet)" : "");
  return false;
}

// train.spike rollback: the weights of the newest intact checkpoint, and the data from after
// the spike step (the samples since that checkpoint are skipped). False without a checkpoint.
bool TrainingRun::roll_back(const Spike& spike) {
  const int64_t spike_step = state_->step;
  const auto rollback = state_->roll_back(*store_, *checkpoints_);
  if (!rollback) return false;
  if (grpo_) grpo_->restore_rollout(rollback->dir);
  training_step_->forget_spikes();
  start_loader(state_->step + 1, state_->samples_consumed);
  if (chief_) {
    fmt::print("step {}: loss spike: {}; rolled back to {} (step {}), skipping samples {}-{} (the data of steps "
               "{}-{})\n",
               spike_step, spike.describe(), rollback->dir, state_->step, rollback->skipped_from,
               rollback->skipped_to - 1, state_->step + 1, spike_step);
    report_->record({{"step", spike_step},
                               {"rollback_to", state_->step},
                               {"skipped_samples", {rollback->skipped_from, rollback->skipped_to}}});
  }
  return true;
}

// After a step: commit a finished background save, write the checkpoints that are due,
// evaluate, and stop on a signal or a STOP file (the exit code), every rank at the same step.
std::optional<int> TrainingRun::checkpoint_evaluate_or_stop() {
  checkpoints_->poll();
  const StopFile stop_file = chief_ ? inspect_stop_file(recipe_.run.dir) : StopFile::none;
  if (stop_file == StopFile::regular && take_stop_file(recipe_.run.dir))
    fmt::print("found {}/STOP after step {}: saving a checkpoint and stopping (the file is removed)\n",
               recipe_.run.dir, state_->step);
  const double stop_votes = sums_->sum(stop_vote(stop_file));
  const bool stopping = stop_votes > 0;
  const bool periodic = recipe_.checkpoint.every > 0 && state_->step % recipe_.checkpoint.every == 0;
  // While steps are being skipped, periodic checkpoints wait: the keep policy would otherwise
  // replace the checkpoints from before the trouble with copies of the same weights.
  if (periodic && (training_step_->non_finite().in_a_row() > 0 || training_step_->spikes_in_a_row() > 0) && state_->step != last_step_ && !stopping) {
    if (chief_) fmt::print("step {}: checkpoint deferred while steps are being skipped\n", state_->step);
  } else if (periodic || state_->step == last_step_ || stopping) {
    save(state_->step);
    rollbacks_to_latest_ = 0;
  }
  if (t_.eval_every > 0 && state_->step % t_.eval_every == 0 && state_->step != t_.steps) run_eval(state_->step);
  watchdog_->step_done(state_->step);
  // Only at a periodic checkpoint just saved (the same step on every rank): one all-reduce there.
  const bool regrouping = !stopping && periodic && state_->step != last_step_ &&
                          training_step_->non_finite().in_a_row() == 0 && training_step_->spikes_in_a_row() == 0 &&
                          sums_->sum(regroup_requested() ? 1.0 : 0.0) > 0;
  if (!stopping && !regrouping) return std::nullopt;
  checkpoints_->finish();
  mesh_->group(parallel::Dim::world)->barrier();
  note_stop_checkpoint_saved();
  if (stop_votes >= kRefusedStopFileVote)  // saved first: the steps so far are kept
    throw InputError(fmt::format("{} (stopped after saving step {})", not_a_stop_file_message(recipe_.run.dir), state_->step));
  if (chief_ && regrouping) {
    take_regroup_request();
    fmt::print("regrouping after step {}: the launcher has more nodes for the run; stopped at this checkpoint, "
               "which the next attempt resumes from on them (exit {})\n",
               state_->step, kExitStopped);
  } else if (chief_) {
    fmt::print("stopped by {} after step {}; run the same command to continue (exit {})\n",
               stop_requested() ? util::signal_name(stop_signal_number()) : "a STOP file or another rank's signal",
               state_->step, kExitStopped);
  }
  return kExitStopped;
}

int TrainingRun::finish() {
  checkpoints_->finish();
  if (state_->step == t_.steps) run_eval(state_->step);
  report_->finish(state_->step, options_.stop_at_step > 0 && state_->step < t_.steps);
  mesh_->group(parallel::Dim::world)->barrier();
  if (memory_ && state_->step == t_.steps) memory_->remove();  // a stopped run resumes from it
  return 0;
}

int64_t TrainingRun::state_bytes(bool peak) const {
  int64_t optimizer_bytes = 0;
  for (const auto& p : trained_.optimized)
    if (!p.frozen) optimizer_bytes += 2 * p.tensor.numel() * static_cast<int64_t>(sizeof(float));
  return optimizer_bytes + (peak ? parallel_->peak_resident_bytes() : parallel_->resident_bytes());
}

void TrainingRun::save(int64_t at_step) {
  if (memory_) memory_->wait();  // the last copy to host memory reads a folder this save may prune
  auto model_config = ckpt::hf_config(model_->config(), tokenizer_->eos_id(), imported_hf_config_);
  // The adapters' settings, for eval, generate and export (which turns them into PEFT's).
  if (recipe_.model.lora.enabled()) model_config[model::kLoraConfigKey] = model::lora_to_json(recipe_.model.lora);
  std::vector<CheckpointAttachment> attachments;
  if (const auto kept = grpo_ ? grpo_->rollout_to_keep(at_step, *sums_) : std::nullopt)
    attachments.push_back({kKeptRolloutFile, kept->tensors(), kept->metadata()});
  state_->save(at_step, *checkpoints_, *store_, model_config, recipe_yaml_, fault_, std::move(attachments));
}

void TrainingRun::run_eval(int64_t at_step) {
  if (!eval_data_) return;
  auto batches = eval_micro_batches(*eval_data_, t_.micro_batch_size, t_.eval_batches, recipe_.data.pack);
  for (auto& batch : batches) batch = context_part(batch, context_split());
  report_->eval(at_step, training_step_->evaluate(batches));
}

ContextSplit TrainingRun::context_split() const {
  return {degrees_.cp, mesh_->coordinate(parallel::Dim::cp), recipe_.parallel.cp_balance, recipe_.model.mtp_layers};
}

// A background thread reads this rank's micro batches ahead of the steps that train on them.
void TrainingRun::start_loader(int64_t from_step, int64_t from_position) {
  loader_.reset();
  if (grpo_) return;  // its batches come from the rollouts
  loader_.emplace(
      [this, from_step, from_position](int64_t at_step) {
        const int64_t position = from_position + (at_step - from_step) * t_.global_batch_size;
        const auto mine = batch_schedule_->step_samples(position, data_ranks_)[static_cast<size_t>(mesh_->data_rank())];
        std::vector<data::MicroBatch> micro_batches;
        for (int64_t micro = 0; micro < accumulation_; ++micro)
          micro_batches.push_back(context_part(
              data::make_micro_batch(*train_data_,
                                     std::vector<int64_t>(mine.begin() + micro * t_.micro_batch_size,
                                                          mine.begin() + (micro + 1) * t_.micro_batch_size),
                                     recipe_.data.pack),
              context_split()));
        return micro_batches;
      },
      from_step, last_step_, recipe_.data.prefetch);
}

}  // namespace xtrain::train
