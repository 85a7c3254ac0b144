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
//   muon_piece                   Muon orthogonalises each rank's flat piece of a matrix instead of
//                                the whole matrix (the trap of sharded Muon)
//   local_negatives              a contrastive model (clip) scores each rank's pairs against that
//                                rank's alone, not the global batch's (no gather of embeddings)
// RANK is the global rank (torchrun's RANK; 0 for a single process). Unset, every query is a
// load of a value parsed once; set, the first query prints a warning, since the run's numbers
// are then wrong on purpose. The value is parsed with the other test faults (util/test_faults.h):
// a malformed value is an InputError.
#pragma once
#include "util/test_faults.h"

namespace xtrain::util {

constexpr double kNumericFaultGradScale = 1e-4;
constexpr double kNumericFaultDecayScale = 1.01;
constexpr double kNumericFaultBeta2Shift = 0.1;  // of the way from beta2 to 1
constexpr double kNumericFaultEpsScale = 10;

// The fault XTRAIN_NUMERIC_FAULT asks for (kind none when unset).
const NumericFault& numeric_fault();

}  // namespace xtrain::util
