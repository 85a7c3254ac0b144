#include "train/fault_injection.h"

#include <csignal>
#include <cstdlib>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include <torch/torch.h>

#include "util/input_error.h"
#include "util/numeric_fault.h"
#include "util/test_faults.h"

namespace xtrain::train {

std::optional<Fault> planned_fault(int64_t rank, int64_t restart_count) {
  const auto planned = util::run_fault_from_environment();  // a malformed value fails on every attempt
  if (!planned || restart_count > 0 || planned->rank != rank) return std::nullopt;
  Fault fault;
  fault.action = planned->action;
  fault.rank = planned->rank;
  fault.step = planned->step;
  fault.last_step = planned->last_step;
  return fault;
}

void inject_fault(const std::optional<Fault>& fault, int64_t step) {
  if (!fault || fault->step != step || fault->action == "kill_in_save" || fault->action == "spike" ||
      fault->action == "stall_in_step")
    return;
  fmt::print(stderr, "XTRAIN_FAULT: {} at step {}\n", fault->action, step);
  std::fflush(stderr);
  if (fault->action == "kill") std::raise(SIGKILL);
  if (fault->action == "stall")
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
  throw std::runtime_error(fmt::format("injected failure at step {} (XTRAIN_FAULT)", step));
}

void inject_fault_mid_step(const std::optional<Fault>& fault, int64_t step) {
  if (!fault || fault->step != step || fault->action != "stall_in_step") return;
  fmt::print(stderr, "XTRAIN_FAULT: stall in the middle of step {}\n", step);
  std::fflush(stderr);
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

void inject_fault_in_save(const std::optional<Fault>& fault, int64_t step) {
  if (!fault || fault->step != step || fault->action != "kill_in_save") return;
  fmt::print(stderr, "XTRAIN_FAULT: kill during the checkpoint write of step {}\n", step);
  std::fflush(stderr);
  std::raise(SIGKILL);
}

double take_injected_spike(std::optional<Fault>& fault, int64_t step) {
  if (!fault || fault->action != "spike" || step < fault->step || step > fault->last_step) return 1.0;
  if (!fault->fired.insert(step).second) return 1.0;
  fmt::print(stderr, "XTRAIN_FAULT: the loss of step {} is multiplied by {:g}\n", step, kInjectedSpikeFactor);
  return kInjectedSpikeFactor;
}

double injected_divisor(double global_count) {
  return util::numeric_fault().strikes_here(util::NumericFaultKind::grad_divisor) ? global_count + 1 : global_count;
}

double injected_micro_batch_weight(int64_t micro, int64_t accumulation) {
  const bool dropped = micro + 1 == accumulation &&
                       util::numeric_fault().strikes_here(util::NumericFaultKind::drop_micro_batch);
  return dropped ? 0.0 : 1.0;
}

void check_numeric_fault_parameter(const std::vector<optim::NamedParameter>& parameters) {
  const auto& fault = util::numeric_fault();
  if (!fault.is(util::NumericFaultKind::grad_scale)) return;
  for (const auto& p : parameters)
    if (p.name == fault.target) return;
  throw InputError(fmt::format(
      "XTRAIN_NUMERIC_FAULT=grad_scale:{}:{}: the model has no parameter of that name (e.g. {})", fault.rank,
      fault.target, parameters.empty() ? "" : parameters.front().name));
}

void inject_gradient_fault(const std::vector<optim::NamedParameter>& parameters) {
  const auto& fault = util::numeric_fault();
  if (!fault.strikes_here(util::NumericFaultKind::grad_scale)) return;
  torch::NoGradGuard no_grad;
  for (const auto& p : parameters)
    if (p.name == fault.target && p.tensor.grad().defined())
      p.tensor.mutable_grad().mul_(1.0 + util::kNumericFaultGradScale);
}

}  // namespace xtrain::train
