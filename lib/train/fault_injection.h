// Fault injection for recovery tests: XTRAIN_FAULT="<action>:<rank>:<step>" makes that rank, on
// the job's first attempt only (TORCHELASTIC_RESTART_COUNT unset or 0), at the start of that
// step, either `kill` itself with SIGKILL, `stall` (sleep without end, as a hung rank does) or
// `fail` (throw, as a crash with a message does); `stall_in_step` stalls it in the forward of its
// second micro batch (inside a pipeline's schedule, its neighbours waiting on its activations
// and gradients); `kill_in_save` kills it in the middle of that
// step's checkpoint write, its own files written and the folder not yet committed; `spike`
// multiplies that step's loss (and so its gradients) by kInjectedSpikeFactor, as a batch of bad
// data does, once per step of <step> or of a range <first>-<last>. Unset, it costs one getenv at
// startup. The value is parsed with the other test faults in util/test_faults.h.
#pragma once
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "optim/adamw.h"

namespace xtrain::train {

struct Fault {
  std::string action;
  int64_t rank = 0;
  int64_t step = 0;
  int64_t last_step = 0;   // `spike` takes a range FIRST-LAST
  std::set<int64_t> fired; // the steps a `spike` has hit, each hit once (a rollback reruns them)
};

// The fault planned for this process, if any (parsed by util/test_faults.h; a malformed value is
// an InputError).
std::optional<Fault> planned_fault(int64_t rank, int64_t restart_count);

// Carries out `fault` if it is due at `step`.
void inject_fault(const std::optional<Fault>& fault, int64_t step);
// The factor a due `spike` fault puts on the step's loss (the first time the step runs), else 1.
constexpr double kInjectedSpikeFactor = 100.0;
double take_injected_spike(std::optional<Fault>& fault, int64_t step);
// Carries out a stall_in_step fault if it is due at `step` (called in a micro batch's forward).
void inject_fault_mid_step(const std::optional<Fault>& fault, int64_t step);
// Carries out a kill_in_save fault if it is due for the checkpoint of `step`.
void inject_fault_in_save(const std::optional<Fault>& fault, int64_t step);

// The trainer's part of XTRAIN_NUMERIC_FAULT (util/numeric_fault.h), each the identity unless
// its fault strikes this rank: the loss divisor (grad_divisor), a micro batch's gradient weight
// (drop_micro_batch: 0 for the step's last one) and, for a model that is not sharded, the
// gradient of one parameter after the micro batches (grad_scale).
double injected_divisor(double global_count);
double injected_micro_batch_weight(int64_t micro, int64_t accumulation);
void inject_gradient_fault(const std::vector<optim::NamedParameter>& parameters);
// A grad_scale fault names one of `parameters` (the whole model's); else an InputError.
void check_numeric_fault_parameter(const std::vector<optim::NamedParameter>& parameters);

}  // namespace xtrain::train
