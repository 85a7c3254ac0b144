// Fault injection for recovery tests: XTRAIN_FAULT="<action>:<rank>:<step>" makes that rank, on
// the job's first attempt only (TORCHELASTIC_RESTART_COUNT unset or 0), at the start of that
// step, either `kill` itself with SIGKILL, `stall` (sleep without end, as a hung rank does) or
// `fail` (throw, as a crash with a message does); `kill_in_save` kills it in the middle of that
// step's checkpoint write, its own files written and the folder not yet committed. Unset, it costs
// one getenv at startup.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace xtrain::train {

struct Fault {
  std::string action;
  int64_t rank = 0;
  int64_t step = 0;
};

// The fault planned for this process, if any; a malformed value is an InputError.
std::optional<Fault> planned_fault(int64_t rank, int64_t restart_count);

// Carries out `fault` if it is due at `step`.
void inject_fault(const std::optional<Fault>& fault, int64_t step);
// Carries out a kill_in_save fault if it is due for the checkpoint of `step`.
void inject_fault_in_save(const std::optional<Fault>& fault, int64_t step);

}  // namespace xtrain::train
