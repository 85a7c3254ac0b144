#include "train/fault_injection.h"

#include <csignal>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include <torch/torch.h>

#include "util/input_error.h"
#include "util/numeric_fault.h"

namespace xtrain::train {

std::optional<Fault> planned_fault(int64_t rank, int64_t restart_count) {
  const char* spec = std::getenv("XTRAIN_FAULT");
  if (!spec || !*spec || restart_count > 0) return std::nullopt;
  Fault fault;
  std::istringstream in(spec);
  std::string rank_text, step_text;
  std::getline(in, fault.action, ':');
  std::getline(in, rank_text, ':');
  std::getline(in, step_text);
  try {
    size_t used = 0;
    fault.rank = std::stoll(rank_text);
    fault.step = fault.last_step = std::stoll(step_text, &used);
    if (used < step_text.size() && step_text[used] == '-') fault.last_step = std::stoll(step_text.substr(used + 1));
  } catch (const std::exception&) {
    throw InputError(
        fmt::format("XTRAIN_FAULT={}: expected <kill|kill_in_save|stall|stall_in_step|fail|spike>:<rank>:<step>[-<last "
                    "step>]",
                    spec));
  }
  if (fault.action != "kill" && fault.action != "kill_in_save" && fault.action != "stall" && fault.action != "fail" &&
      fault.action != "spike" && fault.action != "stall_in_step")
    throw InputError(
        fmt::format("XTRAIN_FAULT={}: the action must be kill, kill_in_save, stall, stall_in_step, fail or spike", spec));
  if (fault.rank != rank) return std::nullopt;
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
