#include "optim/onebit_adam.h"

#include <cmath>

#include <fmt/format.h>
#include <torch/torch.h>

#include "util/input_error.h"

namespace xtrain::optim {

std::string onebit_adam_beta2_warning(double beta2) {
  if (beta2 >= 0.99) return {};
  return fmt::format(
      "optim.betas [_, {}] with onebit_adam: the variance frozen at optim.freeze_step averages only the last ~{:.0f} "
      "steps, so it may not stand for the rest of the run; 1-bit Adam's paper and DeepSpeed use 0.999 (on the demo "
      "recipe 0.999 ends within 2% of AdamW, 0.95 13% away: docs/results.md, \"1-bit Adam\")",
      beta2, 1.0 / (1.0 - beta2));
}

std::string onebit_adam_freeze_warning(int64_t freeze_step, int64_t steps) {
  if (freeze_step < steps) return {};
  return fmt::format(
      "optim.freeze_step {} with train.steps {}: onebit_adam compresses only after step {}, so this run is plain "
      "AdamW throughout (gradients all-reduced, no traffic saved); set optim.freeze_step below train.steps (the "
      "paper warms up for 15-25% of the run), or use optim.name adamw",
      freeze_step, steps, freeze_step);
}

OnebitAdam::OnebitAdam(std::vector<NamedParameter> parameters, AdamWOptions options, int64_t freeze_step,
                       const ExchangeFactory& make_exchange, std::function<void(bool)> set_compressing)
    : AdamW(std::move(parameters), options), freeze_step_(freeze_step), set_compressing_(std::move(set_compressing)) {
  std::vector<int64_t> sizes;
  for (auto* slot : trained()) sizes.push_back(slot->parameter.tensor.numel());
  exchange_ = make_exchange(sizes);
  set_stage(false);
}

std::vector<AdamW::Slot*> OnebitAdam::trained() {
  std::vector<Slot*> slots;
  for (auto& slot : slots_)
    if (!slot.parameter.frozen) slots.push_back(&slot);
  return slots;
}

void OnebitAdam::set_stage(bool compressing) {
  compressing_ = compressing;
  if (set_compressing_) set_compressing_(compressing);
}

void OnebitAdam::step(double lr) {
  if (!compressing_) {
    AdamW::step(lr);
    if (step_ >= freeze_step_) set_stage(true);
    return;
  }
  torch::NoGradGuard no_grad;
  ++step_;
  const double bias_correction1 = 1.0 - std::pow(options_.beta1, static_cast<double>(step_));
  const double bias_correction2_sqrt = std::sqrt(1.0 - std::pow(options_.beta2, static_cast<double>(freeze_step_)));
  const auto slots = trained();
  std::vector<torch::Tensor> momenta;
  for (auto* slot : slots) {
    auto& p = slot->parameter;
    if (p.decay && options_.weight_decay != 0.0) p.tensor.mul_(1.0 - lr * options_.weight_decay);
    // Every rank exchanges every momentum, a parameter without a gradient this step included.
    slot->exp_avg.mul_(options_.beta1);
    if (p.tensor.grad().defined()) slot->exp_avg.add_(p.tensor.grad(), 1.0 - options_.beta1);
    momenta.push_back(slot->exp_avg);
  }
  exchange_->average(momenta);
  for (auto* slot : slots) {
    auto denom = slot->exp_avg_sq.sqrt();
    denom.div_(bias_correction2_sqrt).add_(options_.eps);
    slot->parameter.tensor.addcdiv_(slot->exp_avg, denom, -lr / bias_correction1);
  }
}

void OnebitAdam::load_state(const std::map<std::string, torch::Tensor>& state) {
  AdamW::load_state(state);
  set_stage(step_ >= freeze_step_);
}

std::map<std::string, torch::Tensor> OnebitAdam::rank_state() const {
  auto errors = exchange_->state();
  std::map<std::string, torch::Tensor> state;
  size_t index = 0;
  for (const auto& slot : slots_) {
    if (slot.parameter.frozen || errors.empty()) continue;  // an exchange without error feedback
    for (const char* kind : {"worker_error", "server_error"})
      state[fmt::format("{}.{}", kind, slot.parameter.name)] = errors.at(fmt::format("{}.{}", kind, index));
    ++index;
  }
  state["onebit.replicas"] = torch::tensor(exchange_->replicas(), torch::kInt64);
  state["onebit.replica_rank"] = torch::tensor(exchange_->replica_rank(), torch::kInt64);
  state["onebit.compressing"] = torch::tensor(int64_t{compressing_ ? 1 : 0}, torch::kInt64);
  return state;
}

namespace {
int64_t saved_scalar(const std::map<std::string, torch::Tensor>& state, const std::string& key,
                     const std::string& where) {
  const auto found = state.find(key);
  if (found == state.end()) throw InputError(fmt::format("{}: no entry '{}'", where, key));
  return found->second.item<int64_t>();
}
}  // namespace

std::string OnebitAdam::restart_rank_state(const std::map<std::string, torch::Tensor>& state,
                                           const std::string& where) {
  if (saved_scalar(state, "onebit.compressing", where) == 0) return {};  // zero errors: nothing lost
  const int64_t replicas = saved_scalar(state, "onebit.replicas", where);
  if (replicas != exchange_->replicas())
    throw InputError(fmt::format(
        "{}: 1-bit Adam was past optim.freeze_step over {} replicas, and this run has {} (parallel.dp {}); the "
        "compressed stage averages the momenta over the replicas it was frozen with, so it resumes only with "
        "parallel.dp {} (any parallel.fsdp); a checkpoint from before optim.freeze_step resumes on any layout",
        where, replicas, exchange_->replicas(), exchange_->replicas(), replicas));
  return fmt::format(
      "{} was saved under another layout, and 1-bit Adam's error feedback is per FSDP shard of that layout: it "
      "starts at zero here, dropping one exchange's compression residual (DeepSpeed's 1-bit Adam does so on "
      "every resume); resume on the saved layout to continue bit-exactly",
      where);
}

void OnebitAdam::load_rank_state(const std::map<std::string, torch::Tensor>& state, const std::string& where) {
  auto scalar = [&](const std::string& key) {
    const auto found = state.find(key);
    if (found == state.end()) throw InputError(fmt::format("{}: no entry '{}'", where, key));
    return found->second.item<int64_t>();
  };
  if (scalar("onebit.compressing") == 0) return;  // errors are zero until the freeze, on any layout
  const int64_t replicas = scalar("onebit.replicas");
  if (replicas != exchange_->replicas() || scalar("onebit.replica_rank") != exchange_->replica_rank())
    throw InputError(fmt::format(
        "{}: 1-bit Adam's error feedback was saved by replica {} of {}; this rank is replica {} of {}. Each replica's "
        "errors are its own, so the compressed stage resumes only on the same number of replicas (parallel.dp {}); "
        "a checkpoint from before optim.freeze_step resumes on any",
        where, scalar("onebit.replica_rank"), replicas, exchange_->replica_rank(), exchange_->replicas(), replicas));
  if (exchange_->state().empty()) return;  // an exchange without error feedback
  std::map<std::string, torch::Tensor> errors;
  size_t index = 0;
  for (const auto& slot : slots_) {
    if (slot.parameter.frozen) continue;
    for (const char* kind : {"worker_error", "server_error"}) {
      const auto key = fmt::format("{}.{}", kind, slot.parameter.name);
      const auto found = state.find(key);
      if (found == state.end()) throw InputError(fmt::format("{}: no entry '{}'", where, key));
      errors[fmt::format("{}.{}", kind, index)] = found->second;
    }
    ++index;
  }
  try {
    exchange_->load_state(errors);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", where, e.what()));
  }
}

}  // namespace xtrain::optim
