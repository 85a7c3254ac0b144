// Numeric faults, for the tests that prove the parity and golden checks can fail:
// XTRAIN_NUMERIC_FAULT="<kind>[:<argument>...]" makes the engine compute one thing slightly
// wrong, as a real bug would, while everything else stays exact:
//   grad_scale:RANK:PARAM        RANK's gradient of PARAM, before the data-parallel reduction,
//                                times 1 + kNumericFaultGradScale
//   rope_shift                   queries rotated one position further than their keys
//   skip_reduce_scatter:UNIT     FSDP unit UNIT keeps each rank's own gradient slice instead of
//                                reduce-scattering it (every rank, so collectives still match)
//   grad_divisor:RANK            RANK divides its loss by one target more than the batch has
//   drop_micro_batch:RANK        RANK's last micro batch of each step adds no gradient (its loss
//                                still counts)
//   adamw_decay                  AdamW's weight decay times kNumericFaultDecayScale
//   adamw_beta2                  AdamW's beta2 moved a tenth of the way to 1 (0.95: 0.955)
//   adamw_eps                    AdamW's eps times kNumericFaultEpsScale
// RANK is the global rank (torchrun's RANK; 0 for a single process). Unset, every query is a
// load of a value parsed once; set, the first query prints a warning, since the run's numbers
// are then wrong on purpose. A malformed value is an InputError.
#pragma once
#include <cstdint>
#include <string>

namespace xtrain::util {

enum class NumericFaultKind {
  none,
  grad_scale,
  rope_shift,
  skip_reduce_scatter,
  grad_divisor,
  drop_micro_batch,
  adamw_decay,
  adamw_beta2,
  adamw_eps
};

constexpr double kNumericFaultGradScale = 1e-4;
constexpr double kNumericFaultDecayScale = 1.01;
constexpr double kNumericFaultBeta2Shift = 0.1;  // of the way from beta2 to 1
constexpr double kNumericFaultEpsScale = 10;

struct NumericFault {
  NumericFaultKind kind = NumericFaultKind::none;
  int64_t rank = -1;   // the rank it strikes, -1 for every rank
  std::string target;  // the parameter (grad_scale) or the FSDP unit (skip_reduce_scatter)
  int64_t this_rank = 0;

  bool is(NumericFaultKind k) const { return kind == k; }
  // True when this fault is `k` and strikes this process.
  bool strikes_here(NumericFaultKind k) const;
};

// The fault XTRAIN_NUMERIC_FAULT asks for (kind none when unset).
const NumericFault& numeric_fault();

// Parses a value of XTRAIN_NUMERIC_FAULT; `this_rank` is the process's global rank.
NumericFault parse_numeric_fault(const std::string& spec, int64_t this_rank);

}  // namespace xtrain::util
