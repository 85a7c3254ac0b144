#include "train/training_step.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <thread>

#include <fmt/format.h>
#include <torch/torch.h>

#include "train/health_check.h"

#include "device/device.h"
#include "memory/chunked_loss.h"
#include "train/dropout_key.h"
#include "train/micro_batch_weight.h"
#include "train/precision.h"
#include "train/training_loss.h"
#include "util/process_memory.h"

namespace xtrain::train {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point started) {
  return std::chrono::duration<double>(Clock::now() - started).count();
}

// Whether this rank's losses count: the first tp rank of the pipeline rank that holds the head
// (the last one, or the first for zbv's V).
bool computes_loss(parallel::ParallelModel& model, const parallel::DeviceMesh& mesh) {
  if (mesh.coordinate(parallel::Dim::tp) != 0) return false;
  const auto* stage = model.pipeline_stage();
  return !stage || mesh.coordinate(parallel::Dim::pp) == stage->placement().head_rank();
}

}  // namespace

TrainingStep::TrainingStep(parallel::ParallelModel& model, Schedule& schedule, optim::AdamW& optimizer,
                           optim::DynamicLossScaler* loss_scaler, const std::vector<optim::NamedParameter>& optimized,
                           ExpertBalance& experts, const parallel::DeviceMesh& mesh, RankSums& sums,
                           StepSettings settings)
    : model_(model),
      schedule_(schedule),
      optimizer_(optimizer),
      loss_scaler_(loss_scaler),
      optimized_(optimized),
      experts_(experts),
      mesh_(mesh),
      sums_(sums),
      settings_(std::move(settings)),
      data_share_(computes_loss(model, mesh) ? 1.0 : 0.0),
      aux_share_(mesh.coordinate(parallel::Dim::tp) == 0 ? 1.0 : 0.0),
      non_finite_(settings_.max_skipped_steps),
      spikes_(settings_.spike_window, settings_.spike_zscore) {
  for (const auto& p : optimized_)
    if (!p.frozen) trainable_.push_back(p.tensor);
  slow_fault_ = health_fault().slow_rank == mesh.coordinate(parallel::Dim::world);
}

namespace {
// Max over mean of the cp ranks' causal attention work in this rank's micro batches (every cp
// rank has every rank's figures); 0 without context parallelism.
double context_cost_spread(const std::vector<data::MicroBatch>& micro_batches) {
  std::vector<double> totals;
  for (const auto& batch : micro_batches) {
    totals.resize(batch.context_costs.size(), 0.0);
    for (size_t r = 0; r < totals.size(); ++r) totals[r] += batch.context_costs[r];
  }
  const double sum = std::accumulate(totals.begin(), totals.end(), 0.0);
  if (totals.empty() || sum <= 0) return 0.0;
  return *std::max_element(totals.begin(), totals.end()) / (sum / static_cast<double>(totals.size()));
}
}  // namespace

// This rank's share of the global batch (the global batches do not depend on the layout),
// through the schedule, then the update.
StepOutcome TrainingStep::run(const StepInput& input) {
  input_ = input;
  StepOutcome outcome;
  outcome.lr = input.lr;
  const auto& micro_batches = *input.micro_batches;
  clip_low_min_.clear();
  clip_high_max_.clear();
  token_means_.clear();
  completion_tokens_.clear();
  step_targets_ = sums_.sum(local_target_count(micro_batches, data_share_));
  step_divisor_ = injected_divisor(step_targets_);
  outcome.context_cost_spread = context_cost_spread(micro_batches);
  const auto busy_started = Clock::now();
  const double blocked_before = model_.comm_seconds().blocked;
  MicroBatchLosses losses = schedule_.run(micro_batches, *this);
  if (slow_fault_) std::this_thread::sleep_for(std::chrono::milliseconds(40));
  model_.finish_gradients();
  outcome.pipeline_idle = schedule_.last_idle_seconds();
  outcome.pipeline_in_flight = static_cast<double>(schedule_.last_peak_in_flight());
  outcome.pipeline_passes = schedule_.last_pass_seconds();
  if (model_.whole()) inject_gradient_fault(optimized_);
  // This rank's forward and backward time, less what it spent blocked on its peers: a rank
  // whose share is heavier (or whose machine is slower) stands out. Reading the loss waits for
  // the device's queued work; a pipeline's other stages have none.
  const double local_loss_sum = losses.loss_sum.defined() ? losses.loss_sum.item<double>() : 0.0;
  const double busy = seconds_since(busy_started) - (model_.comm_seconds().blocked - blocked_before);
  const auto [global_loss_sum, spreads] =
      sums_.sum_and_spreads(local_loss_sum * data_share_,
                            {busy, util::peak_rss_mib(),
                             static_cast<double>(util::peak_device_memory_bytes(settings_.device)) / (1 << 20)});
  outcome.loss = step_targets_ > 0 ? global_loss_sum / step_targets_ : 0.0;
  outcome.busy = spreads[0];
  outcome.peak_rss_mib = spreads[1];
  outcome.peak_device_mib = spreads[2];
  sum_losses(losses, outcome);
  update(outcome);
  if (mesh_.size(parallel::Dim::pp) > 1) report_stages(outcome);
  return outcome;
}

// The auxiliary losses per target over the global batch, and the experts' loads.
// Under pipeline parallelism each stage holds its layers' share of the router losses and the
// rows of its layers' loads (zeros elsewhere): summed over the stages too, they are one
// process's, and every stage moves every layer's expert bias alike.
void TrainingStep::sum_losses(const MicroBatchLosses& losses, StepOutcome& outcome) {
  const auto& dpo_names = dpo_metric_names();
  for (const auto& [name, value] : losses.aux_losses) {
    const bool objective = (dpo_ && std::find(dpo_names.begin(), dpo_names.end(), name) != dpo_names.end()) ||
                           (grpo_ && is_grpo_loss_metric(name));
    auto& figures = objective ? outcome.objective_metrics : outcome.aux_losses;
    figures[name] = step_targets_ > 0 ? sums_.sum(value.item<double>() * aux_share_) / step_targets_ : 0.0;
  }
  if (grpo_) {
    auto host = [](const std::vector<torch::Tensor>& values) {
      std::vector<double> figures;
      for (const auto& value : values) figures.push_back(value.item<double>());
      return figures;
    };
    const auto extrema = clip_extrema_over_ranks(host(clip_low_min_), host(clip_high_max_), sums_);
    outcome.objective_metrics[kClipLowMin] = extrema.low_min;
    outcome.objective_metrics[kClipHighMax] = extrema.high_max;
    std::map<std::string, std::vector<double>> means;
    for (const auto& [name, values] : token_means_) means[name] = host(values);
    for (const auto& [name, mean] : token_means_over_ranks(means, host(completion_tokens_), aux_share_, sums_))
      outcome.objective_metrics[name] = mean;
  }
  // The cp ranks route different tokens of the same rows: their loads add up too.
  if (experts_.active() && losses.expert_load.defined())
    outcome.experts = experts_.finish_step(
        losses.expert_load, losses.dropped,
        *mesh_.flatten({parallel::Dim::pp, parallel::Dim::dp, parallel::Dim::fsdp, parallel::Dim::cp}));
}

// The weighting of train/micro_batch_weight.h; the divisor is the step's global target count
// unless a numeric fault changes it, and a fault may drop the step's last micro batch.
double TrainingStep::micro_batch_loss_weight(const data::MicroBatch& batch, int64_t index, int64_t count) const {
  return micro_batch_loss_weight(batch.target_count, index, count);
}

double TrainingStep::micro_batch_loss_weight(int64_t targets, int64_t index, int64_t count) const {
  const double loss_scale = loss_scaler_ ? loss_scaler_->scale() : 1.0;
  return train::micro_batch_loss_weight(targets, step_divisor_, loss_scale) * injected_micro_batch_weight(index, count);
}

// The depths' losses are (parts of) the whole micro batch's means under context parallelism.
int64_t TrainingStep::depth_targets(const data::MicroBatch& batch) {
  return batch.context ? batch.whole_target_count : batch.target_count;
}

MicroBatchLosses TrainingStep::forward_backward(const data::MicroBatch& batch, int64_t index, int64_t count) {
  const auto targets = static_cast<double>(batch.target_count);
  if (index == 1) inject_fault_mid_step(*input_.fault, input_.step);
  const double loss_weight = micro_batch_loss_weight(batch, index, count);
  model_.begin_micro_batch(index + 1 == count);
  BatchLoss output;
  {
    PrecisionScope precision(settings_.dtype, settings_.device.type());
    auto model_input = model_batch(batch, settings_.device);
    // Auxiliary losses weigh as the loss does, so that their gradient does not depend on the
    // layout; the model applies it inside its blocks' backward (model/layers/aux_loss.h).
    model_input.loss_weight = loss_weight;
    if (draws_dropout())
      model_input.dropout = dropout_key(batch, dropout_seed_, input_.step, settings_.device);
    if (grpo_) completion_tokens_.push_back(model_input.labels.ne(data::kIgnoreIndex).sum());
    output = dpo_    ? dpo_->loss(model_.model(), model_input)
             : grpo_ ? grpo_->loss(model_.model(), model_input, *input_.grpo, index)
                     : training_loss(model_.model(), model_input, settings_.loss_chunk,
                                  model_.fresh_head_gradients() ? memory::WeightGrad::into_fresh_grad
                                                                : memory::WeightGrad::into_existing_grad);
  }
  auto loss = output.loss;
  if (input_.loss_factor != 1.0) loss = loss * input_.loss_factor;
  MicroBatchLosses losses{loss.detach().to(torch::kFloat64) * targets, {}, output.expert_load, output.dropped, {}};
  for (const auto& [name, aux] : output.aux_losses) {
    // GRPO's least and most clipped fractions join the ranks' at each micro batch (sum_losses).
    if (grpo_ && (name == kClipLowMin || name == kClipHighMax)) {
      (name == kClipLowMin ? clip_low_min_ : clip_high_max_).push_back(aux.detach());
      continue;
    }
    // Its token means join the ranks' tokens at each micro batch (sum_losses).
    if (grpo_ && is_grpo_token_mean(name)) {
      token_means_[name].push_back(aux.detach());
      continue;
    }
    losses.aux_losses[name] = aux.detach().to(torch::kFloat64) * targets;
  }
  const int64_t whole = depth_targets(batch);
  for (const auto& [name, depth] : output.depth_losses)
    losses.aux_losses[name] = depth.detach().to(torch::kFloat64) * static_cast<double>(whole);
  auto objective = loss * loss_weight;
  if (output.mtp_loss.defined())
    objective = objective + output.mtp_loss * micro_batch_loss_weight(whole, index, count);
  objective.backward();
  model_.end_micro_batch();
  return losses;
}

ChunkOutput TrainingStep::forward_chunk(const parallel::PipelineChunk& part, const data::MicroBatch& batch,
                                        int64_t index, int64_t count, const torch::Tensor& input) {
  if (index == 1) inject_fault_mid_step(*input_.fault, input_.step);
  const ChunkLossWeights weights{micro_batch_loss_weight(batch, index, count),
                                 micro_batch_loss_weight(depth_targets(batch), index, count)};
  return run_chunk_layers(part, batch, input, weights, input_.loss_factor, /*training=*/true);
}

MicroBatchLosses TrainingStep::forward(const data::MicroBatch& batch) {
  const auto score = score_micro_batch(model_.model(), batch, settings_.dtype, settings_.loss_chunk);
  MicroBatchLosses losses;
  losses.loss_sum = score.loss_sum;
  losses.correct = score.correct;
  return losses;
}

ChunkOutput TrainingStep::forward_chunk_only(const parallel::PipelineChunk& part, const data::MicroBatch& batch,
                                             const torch::Tensor& input) {
  return run_chunk_layers(part, batch, input, {}, 1.0, /*training=*/false);
}

// The chunk's layers on `input` and, on the model's last chunk, the micro batch's mean loss
// (times loss_factor, an injected spike) times its weight, plus its prediction depths' loss times
// theirs, and its loss sums to report; on every chunk its layers' router losses and expert
// loads, summed over the pipeline at the step's end (sum_losses).
ChunkOutput TrainingStep::run_chunk_layers(const parallel::PipelineChunk& part, const data::MicroBatch& batch,
                                           const torch::Tensor& input, ChunkLossWeights weights, double loss_factor,
                                           bool training) {
  PrecisionScope precision(settings_.dtype, settings_.device.type());
  auto model_input = model_batch(batch, settings_.device);
  model_input.loss_weight = weights.loss;
  auto& model = model_.model();
  if (training && draws_dropout())
    model_input.dropout = dropout_key(batch, dropout_seed_, input_.step, settings_.device);
  auto out = model.forward_chunk(model_input, input, part.first_layer, part.last_layer, part.embedding, part.head);
  const auto targets = static_cast<double>(batch.target_count);
  MicroBatchLosses losses{{}, {}, out.expert_load, out.dropped, {}};
  for (const auto& [name, aux] : out.aux_losses) losses.aux_losses[name] = aux.detach().to(torch::kFloat64) * targets;
  // Every stage reports the depths' losses, zero but on the last, so that they sum over the ranks.
  for (int64_t k = 1; k <= model.config().mtp_layers; ++k)
    losses.aux_losses[depth_loss_name(k)] = torch::zeros({}, torch::dtype(torch::kFloat64).device(settings_.device));
  if (!part.head) return {out.hidden, losses};
  const auto head = output_loss(model, model_input, std::move(out), settings_.loss_chunk);
  auto loss = head.loss;
  if (loss_factor != 1.0) loss = loss * loss_factor;
  losses.loss_sum = loss.detach().to(torch::kFloat64) * targets;
  for (const auto& [name, depth] : head.depth_losses)
    losses.aux_losses[name] = depth.detach().to(torch::kFloat64) * static_cast<double>(depth_targets(batch));
  auto objective = loss * weights.loss;
  if (head.mtp_loss.defined()) objective = objective + head.mtp_loss * weights.depths;
  return {objective, losses};
}

// fp16: a step whose gradients overflowed is skipped (no update) and the loss scale shrinks;
// a non-finite loss or gradient norm, or a loss spike, skips the step too.
void TrainingStep::update(StepOutcome& outcome) {
  const int64_t step = input_.step;
  outcome.loss_scale = loss_scaler_ ? loss_scaler_->scale() : 1.0;
  bool finite_gradients = true;
  if (loss_scaler_) finite_gradients = sums_.sum(loss_scaler_->unscale(trainable_) ? 0.0 : 1.0) == 0.0;
  outcome.skipped = !finite_gradients;
  if (finite_gradients) {
    outcome.grad_norm = model_.clip_grad_norm(settings_.grad_clip);
    outcome.skipped = !non_finite_.admit(step, outcome.loss, outcome.grad_norm);
    if (!outcome.skipped && settings_.detect_spikes) outcome.spike = spikes_.check(outcome.loss, outcome.grad_norm);
    if (outcome.spike) {
      outcome.skipped = true;
      ++spikes_in_a_row_;
    } else if (!outcome.skipped) {
      spikes_in_a_row_ = 0;
      spikes_.add(outcome.loss, outcome.grad_norm);
      optimizer_.step(outcome.lr);
      for (const auto& [name, value] : optimizer_.step_metrics()) outcome.objective_metrics[name] = value;
    }
    if (outcome.skipped && !outcome.spike && settings_.chief)
      fmt::print("step {}: loss {:.4f}, gradient norm {:.4g}: not finite; step skipped, no update ({} in a row, {} "
                 "in all)\n",
                 step, outcome.loss, outcome.grad_norm, non_finite_.in_a_row(), non_finite_.total());
  }
  if (loss_scaler_) {
    loss_scaler_->update(finite_gradients);
    if (!finite_gradients && settings_.chief)
      fmt::print("step {}: fp16 gradients overflowed at loss scale {:g}; step skipped, loss scale now {:g}\n", step,
                 outcome.loss_scale, loss_scaler_->scale());
  }
}

// Each pipeline stage's idle time, most micro batches in flight, peak resident and tensor memory
// and seconds in each kind of pass, by the wall clock and its CPU time (of its first tp and data
// rank), for the step's metrics: one all-reduce.
void TrainingStep::report_stages(StepOutcome& outcome) {
  const auto stages = static_cast<size_t>(mesh_.size(parallel::Dim::pp));
  constexpr size_t kFigures = 10;
  std::vector<double> values(kFigures * stages, 0.0);
  if (mesh_.coordinate(parallel::Dim::tp) == 0 && mesh_.data_rank() == 0) {
    const auto stage = static_cast<size_t>(mesh_.coordinate(parallel::Dim::pp));
    const auto& passes = outcome.pipeline_passes;
    const double tensor_mib = static_cast<double>(util::peak_device_memory_bytes(settings_.device)) / (1 << 20);
    const double mine[kFigures] = {outcome.pipeline_idle, outcome.pipeline_in_flight, util::peak_rss_mib(),
                                   passes.forward,        passes.backward,            passes.weight,
                                   passes.forward_cpu,    passes.backward_cpu,        passes.weight_cpu,
                                   tensor_mib};
    for (size_t figure = 0; figure < kFigures; ++figure) values[figure * stages + stage] = mine[figure];
  }
  values = sums_.sum(std::move(values));
  auto figure = [&](size_t index) {
    const auto first = values.begin() + static_cast<std::ptrdiff_t>(index * stages);
    return std::vector<double>(first, first + static_cast<std::ptrdiff_t>(stages));
  };
  outcome.stage_idle = figure(0);
  outcome.stage_in_flight = figure(1);
  outcome.stage_rss = figure(2);
  outcome.stage_forward = figure(3);
  outcome.stage_backward = figure(4);
  outcome.stage_weight = figure(5);
  outcome.stage_forward_cpu = figure(6);
  outcome.stage_backward_cpu = figure(7);
  outcome.stage_weight_cpu = figure(8);
  outcome.stage_tensor_mib = figure(9);
}

// Every rank evaluates the same batches (a sharded model's gathers need all of them); the figures
// are those of the rank that computes the loss for the first data rank.
EvalResult TrainingStep::evaluate(const std::vector<data::MicroBatch>& batches) {
  torch::NoGradGuard no_grad;
  model_.begin_inference();
  model_.model().eval();
  const auto losses = schedule_.evaluate(batches, *this);
  model_.model().train();
  model_.end_inference();
  // The holders: the first data rank's loss-computing ranks, one per cp part of its rows.
  const bool holder = data_share_ > 0 && mesh_.data_rank() == 0;
  const bool measured = holder && losses.correct.defined();
  double targets = 0;
  for (const auto& batch : batches) targets += static_cast<double>(batch.target_count);
  const auto totals = sums_.sum({holder && losses.loss_sum.defined() ? losses.loss_sum.item<double>() : 0.0,
                                 measured ? losses.correct.item<double>() : 0.0, measured ? 1.0 : 0.0,
                                 holder ? targets : 0.0});
  EvalResult result;
  result.tokens = static_cast<int64_t>(totals[3]);
  result.loss = result.tokens ? totals[0] / static_cast<double>(result.tokens) : 0.0;
  if (totals[2] > 0 && result.tokens) result.accuracy = totals[1] / static_cast<double>(result.tokens);
  result.perplexity = std::exp(result.loss);
  return result;
}

}  // namespace xtrain::train
