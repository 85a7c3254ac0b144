#include "train/step_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <fmt/format.h>

#include "device/device.h"
#include "util/process_memory.h"

namespace xtrain::train {

std::string format_duration(double seconds) {
  const auto total = static_cast<int64_t>(std::llround(seconds));
  if (total >= 3600) return fmt::format("{}h{:02}m", total / 3600, (total % 3600) / 60);
  if (total >= 60) return fmt::format("{}m{:02}s", total / 60, total % 60);
  return fmt::format("{}s", total);
}

std::string format_rate(double tokens_per_s) {
  if (tokens_per_s >= 1e6) return fmt::format("{:.2f}M", tokens_per_s / 1e6);
  if (tokens_per_s >= 1e3) return fmt::format("{:.1f}k", tokens_per_s / 1e3);
  return fmt::format("{:.0f}", tokens_per_s);
}

namespace {
// Steps over which a persistently slow rank is looked for (train/slow_rank_watch.h).
constexpr int64_t kSlowRankWindow = 20;
}  // namespace

StepReport::StepReport(const config::Recipe& recipe, const parallel::ParallelDegrees& degrees, int64_t last_step,
                       int64_t epoch_samples, torch::Device device, bool distributed, bool chief)
    : recipe_(recipe),
      degrees_(degrees),
      last_step_(last_step),
      epoch_samples_(epoch_samples),
      tokens_per_step_(recipe.train.global_batch_size * recipe.data.seq_len),
      device_(device),
      distributed_(distributed),
      chief_(chief),
      slow_ranks_(kSlowRankWindow, recipe.dist.health_slow_fraction) {}

void StepReport::open_metrics(int64_t resume_step, const std::string& recipe_yaml) {
  if (!chief_) return;
  const std::string tensorboard_dir = recipe_.run.dir + "/tensorboard";
  // A tensorboard folder the run cannot use is refused before metrics.jsonl is begun.
  if (recipe_.metrics.tensorboard) TensorBoardLog::check_folder(tensorboard_dir);
  metrics_.emplace(recipe_.run.dir + "/metrics.jsonl", resume_step);
  if (recipe_.metrics.tensorboard) tensorboard_.emplace(tensorboard_dir, resume_step, recipe_yaml);
}

void StepReport::record(const nlohmann::ordered_json& record) {
  metrics_->write(record);
  if (tensorboard_) tensorboard_->write(record);
}

double StepReport::device_mib() const {
  return static_cast<double>(util::peak_device_memory_bytes(device_)) / (1 << 20);
}

void StepReport::step(int64_t step, int64_t samples_consumed, const StepOutcome& outcome, int64_t state_bytes,
                      const NonFiniteGuard& non_finite) {
  ++steps_run_;
  data_wait_total_ += outcome.data_wait;
  imbalance_sum_ += outcome.busy.mean > 0 ? outcome.busy.max / outcome.busy.mean : 1.0;
  peak_state_bytes_ = std::max(peak_state_bytes_, state_bytes);
  interval_seconds_ += outcome.seconds;
  session_seconds_ += outcome.seconds;
  ++interval_steps_;
  if (!chief_) return;
  write_metrics(step, samples_consumed, outcome, non_finite);
  if (step % recipe_.train.log_every != 0 && step != last_step_ && steps_run_ != 1) return;
  print_line(step, outcome);
  interval_seconds_ = 0;
  interval_steps_ = 0;
}

void StepReport::write_metrics(int64_t step, int64_t samples_consumed, const StepOutcome& outcome,
                               const NonFiniteGuard& non_finite) {
  nlohmann::ordered_json record = {{"step", step},
                                   {"loss", outcome.loss},
                                   {"lr", outcome.lr},
                                   {"grad_norm", outcome.grad_norm},
                                   {"tokens_per_s", tokens_per_step_ / outcome.seconds},
                                   {"step_s", outcome.seconds},
                                   {"tokens_seen", samples_consumed * recipe_.data.seq_len},
                                   {"peak_rss_mib", util::peak_rss_mib()},
                                   {"peak_device_mib", device_mib()},
                                   {"state_mib", static_cast<double>(peak_state_bytes_) / (1 << 20)},
                                   {"comm_wait_s", outcome.comm.blocked},
                                   {"comm_waits", outcome.comm.waits},
                                   {"data_wait_s", outcome.data_wait},
                                   {"data_read_s", outcome.data_read}};
  // Global sample (or packed row) indices run on across epochs (data/sample_dataset.h).
  const int64_t position = samples_consumed - recipe_.train.global_batch_size;
  record["data.position"] = position;
  record["data.samples"] = recipe_.train.global_batch_size;
  if (epoch_samples_ > 0) {
    record["data.epoch"] = position / epoch_samples_;
    record["data.offset"] = position % epoch_samples_;
  }
  for (const auto& [name, value] : outcome.aux_losses) record["aux_loss." + name] = value;
  for (const auto& [name, value] : outcome.objective_metrics) record[name] = value;
  if (outcome.gathered_bytes > 0) record["fsdp.gathered_bytes"] = outcome.gathered_bytes;
  if (degrees_.tp > 1) {
    record["tp.collective_s"] = outcome.comm.tensor_parallel;
    record["tp.collectives"] = outcome.comm.tensor_parallel_waits;
  }
  if (degrees_.cp > 1) {
    record["cp.attention_cost_max_over_mean"] = outcome.context_cost_spread;
    if (recipe_.parallel.cp_kind == parallel::ContextKind::ring) {
      record["cp.ring_attention_s"] = outcome.comm.ring_attention;
      record["cp.ring_blocked_s"] = outcome.comm.ring_blocked;
      record["cp.ring_waits"] = outcome.comm.ring_waits;
    }
  }
  if (degrees_.pp > 1) {
    record["pp.bubble_s"] = outcome.pipeline_idle;
    record["pp.bubble_fraction"] = outcome.seconds > 0 ? outcome.pipeline_idle / outcome.seconds : 0.0;
    record["pp.idle_s_by_stage"] = outcome.stage_idle;
    record["pp.in_flight_by_stage"] = outcome.stage_in_flight;
    record["pp.peak_rss_mib_by_stage"] = outcome.stage_rss;
    record["pp.forward_s_by_stage"] = outcome.stage_forward;
    record["pp.backward_s_by_stage"] = outcome.stage_backward;
    record["pp.weight_grad_s_by_stage"] = outcome.stage_weight;
    record["pp.forward_cpu_s_by_stage"] = outcome.stage_forward_cpu;
    record["pp.backward_cpu_s_by_stage"] = outcome.stage_backward_cpu;
    record["pp.weight_grad_cpu_s_by_stage"] = outcome.stage_weight_cpu;
    record["pp.peak_tensor_mib_by_stage"] = outcome.stage_tensor_mib;
  }
  if (const auto& experts = outcome.experts) {
    record["moe.load_ratio"] = experts->load_ratio;
    record["moe.worst_layer"] = experts->worst_layer;
    record["moe.worst_load_ratio"] = experts->worst_ratio;
    record["moe.dropped_fraction"] = experts->dropped_fraction;
    if (degrees_.ep > 1) {
      record["moe.all_to_all_wait_s"] = outcome.comm.expert_forward;
      record["moe.all_to_all_backward_wait_s"] = outcome.comm.expert_backward;
      record["moe.all_to_all_waits"] = outcome.comm.expert_waits;
    }
    if (recipe_.model.router == model::Router::sigmoid_bias) {
      record["moe.bias_min"] = experts->bias_min;
      record["moe.bias_max"] = experts->bias_max;
    }
  }
  if (distributed_) {
    record["busy_s_mean"] = outcome.busy.mean;
    record["busy_s_max"] = outcome.busy.max;
    record["slowest_rank"] = outcome.busy.argmax;
    // The fullest rank's peak resident memory (peak_rss_mib is this rank's), before the update.
    record["peak_rss_mib_max"] = outcome.peak_rss_mib.max;
    record["peak_rss_rank"] = outcome.peak_rss_mib.argmax;
    record["peak_device_mib_max"] = outcome.peak_device_mib.max;
    if (const auto slow = slow_ranks_.add(outcome.busy)) {
      record["persistent_slow_rank"] = slow->rank;
      record["persistent_slow_ratio"] = slow->ratio;
      if (slow->rank != warned_slow_rank_)
        fmt::print(stderr,
                   "warning: rank {} was the slowest in {} of the last {} steps, busy {:.2f} x the mean rank "
                   "(dist.health_slow_fraction {}); `xtrain health` measures each rank and link\n",
                   slow->rank, slow->steps, slow->window, slow->ratio, recipe_.dist.health_slow_fraction);
      warned_slow_rank_ = slow->rank;
    }
  }
  if (recipe_.train.dtype == config::Dtype::fp16) record["loss_scale"] = outcome.loss_scale;
  record["skipped"] = outcome.skipped;
  record["skipped_total"] = non_finite.total();
  if (outcome.spike) record["spike"] = to_string(recipe_.train.spike);
  this->record(record);
}

void StepReport::print_line(int64_t step, const StepOutcome& outcome) {
  std::string aux;
  for (const auto& [name, value] : outcome.aux_losses) aux += fmt::format(" | {} {:.4f}", name, value);
  if (const auto margins = outcome.objective_metrics.find("rewards/margins"); margins != outcome.objective_metrics.end())
    aux += fmt::format(" | margin {:.4f}, accuracy {:.2f}", margins->second,
                       outcome.objective_metrics.at("rewards/accuracies"));
  if (const auto reward = outcome.objective_metrics.find("reward"); reward != outcome.objective_metrics.end()) {
    const auto& m = outcome.objective_metrics;
    const auto kl = m.find("kl");
    aux += fmt::format(" | reward {:.3f} (std {:.3f}){} | completion {:.1f} tokens, rollout {:.0f} tok/s", reward->second,
                       m.at("reward_std"), kl == m.end() ? "" : fmt::format(", kl {:.4f}", kl->second),
                       m.at("completions/mean_length"), m.at("rollout/tokens_per_s"));
  }
  if (const auto& experts = outcome.experts) {
    aux += fmt::format(" | experts max/mean {:.2f} (layer {})", experts->worst_ratio, experts->worst_layer);
    if (recipe_.model.capacity_factor > 0) aux += fmt::format(", dropped {:.1f}%", 100 * experts->dropped_fraction);
  }
  const int64_t steps = recipe_.train.steps;
  const double mean_step = session_seconds_ / static_cast<double>(steps_run_);
  fmt::print("step {:>{}}/{} | loss {:.4f}{} | lr {:.2e} | grad norm {:.3f} | {} tok/s | {:.0f} MiB{} | eta {}\n",
             step, std::to_string(steps).size(), steps, outcome.loss, aux, outcome.lr, outcome.grad_norm,
             format_rate(tokens_per_step_ * interval_steps_ / interval_seconds_), util::peak_rss_mib(),
             device_.is_cuda() ? fmt::format(" | {:.0f} MiB on {}", device_mib(), device_.str()) : "",
             format_duration(mean_step * static_cast<double>(last_step_ - step)));
  std::fflush(stdout);
}

void StepReport::eval(int64_t step, const EvalResult& result) {
  if (!chief_) return;
  fmt::print("eval step {}: loss {:.4f} | perplexity {:.3f}{} | {} tokens\n", step, result.loss, result.perplexity,
             accuracy_text(result), result.tokens);
  nlohmann::ordered_json record = {{"step", step}, {"eval_loss", result.loss},
                                   {"eval_perplexity", result.perplexity}, {"eval_tokens", result.tokens}};
  if (!std::isnan(result.accuracy)) record["eval_accuracy"] = result.accuracy;
  this->record(record);
}

void StepReport::finish(int64_t step, bool stopped_early) {
  if (!chief_) return;
  if (stopped_early)
    fmt::print("stopped at step {} of {} (--stop-at-step); run again to continue\n", step, recipe_.train.steps);
  else
    fmt::print("done: {} steps\n", step);
  fmt::print("memory per rank: parameters + gradients + optimizer state {:.1f} MiB (peak, with gathered blocks)\n",
             static_cast<double>(peak_state_bytes_) / (1 << 20));
  if (distributed_)
    fmt::print("ranks: the busiest rank computed {:.1f}% longer than the mean per step (busy_s_max / busy_s_mean, "
               "averaged over steps)\n",
               100.0 * (imbalance_sum_ / static_cast<double>(steps_run_) - 1.0));
  fmt::print("data: waited {:.3f} s for batches in {} steps ({:.2f}% of step time)\n", data_wait_total_, steps_run_,
             session_seconds_ > 0 ? 100.0 * data_wait_total_ / session_seconds_ : 0.0);
}

}  // namespace xtrain::train
