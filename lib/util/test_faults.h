// Test faults: environment variables that make the engine fail on purpose, so that the tests of
// recovery, of the health check and of the numeric checks can prove those catch what they claim.
// All three share one grammar and one error style, parsed here; each feature's consumer
// (train/fault_injection.h, train/health_check.h, util/numeric_fault.h) acts on the result.
//
//   XTRAIN_FAULT          kill, kill_in_save, stall, stall_in_step or fail:<rank>:<step>;
//                         spike:<rank>:<step>[-<last step>]      (train/fault_injection.h)
//   XTRAIN_HEALTH_FAULT   slow:<rank> or corrupt:<rank>         (train/health_check.h)
//   XTRAIN_NUMERIC_FAULT  grad_scale:<rank>:<parameter>, rope_shift, ... (util/numeric_fault.h)
//
// Grammar: <kind>[:<field>]..., fields separated by ':'; a rank or a step is a non-negative
// integer, a range <first>-<last> has last >= first, a name (a parameter, an FSDP unit) is any
// non-empty text without ':'. Unset or empty, there is no fault. A malformed value is an
// InputError (exit 2) that names the variable and its value and lists the expected forms:
//   XTRAIN_HEALTH_FAULT=fast:1: unknown fault 'fast' (expected slow:<rank> or corrupt:<rank>)
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace xtrain::util {

// XTRAIN_FAULT: what a rank does at a step, on the job's first attempt.
struct RunFault {
  std::string action;  // kill, kill_in_save, stall, stall_in_step, fail or spike
  int64_t rank = 0;
  int64_t step = 0;
  int64_t last_step = 0;  // spike's range; step otherwise
};
std::optional<RunFault> parse_run_fault(const std::string& value);
std::optional<RunFault> run_fault_from_environment();

// XTRAIN_HEALTH_FAULT: the rank of each kind (-1: none).
struct HealthFault {
  int64_t slow_rank = -1, corrupt_rank = -1;
};
HealthFault parse_health_fault(const std::string& value);
HealthFault health_fault_from_environment();

// XTRAIN_NUMERIC_FAULT: one computation made slightly wrong (the kinds: util/numeric_fault.h).
enum class NumericFaultKind {
  none,
  grad_scale,
  rope_shift,
  skip_reduce_scatter,
  grad_divisor,
  drop_micro_batch,
  adamw_decay,
  adamw_beta2,
  adamw_eps,
  muon_piece,
  local_negatives
};
struct NumericFault {
  NumericFaultKind kind = NumericFaultKind::none;
  int64_t rank = -1;   // the rank it strikes, -1 for every rank
  std::string target;  // the parameter (grad_scale) or the FSDP unit (skip_reduce_scatter)
  int64_t this_rank = 0;

  bool is(NumericFaultKind k) const { return kind == k; }
  // True when this fault is `k` and strikes this process.
  bool strikes_here(NumericFaultKind k) const;
};
// `this_rank` is the process's global rank.
NumericFault parse_numeric_fault(const std::string& value, int64_t this_rank);
// The variable's value, empty when unset.
std::string numeric_fault_value_from_environment();

}  // namespace xtrain::util
