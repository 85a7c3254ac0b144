// The environment each rank runs in: the launcher's own, plus torchrun's variables (RANK,
// WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, TORCHELASTIC_*, ...), so that a rank behaves the same
// under `xtrain launch`, `torchrun --no-python` and any launcher speaking that protocol.
// Pure functions of their arguments.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "launch/launch_options.h"

namespace xtrain::launch {

// The file whose appearance asks the ranks to stop after their next periodic checkpoint so that
// the job can go on on more nodes (node_membership.h's growing back; train/regroup_request.h).
// `xtrain launch` names one per attempt in each rank's environment.
constexpr const char* kRegroupFileVariable = "XTRAIN_REGROUP_FILE";

// torchrun's variables for one rank of this node in a given attempt (0 for the first start,
// then one more per restart). options must be resolved (master_port and run_id set).
std::map<std::string, std::string> torchrun_variables(const LaunchOptions& options, int local_rank, int restart_count,
                                                      const std::string& error_file);

// True when the ranks get OMP_NUM_THREADS=1 because the launcher's environment leaves it
// unset and several ranks share the node (torchrun's rule, to avoid oversubscribing cores).
bool defaults_omp_num_threads(const std::vector<std::string>& parent_environment, const LaunchOptions& options);

// The rank's whole environment as NAME=VALUE entries: the parent's entries, with the torchrun
// variables replacing any of the same name, and OMP_NUM_THREADS=1 when defaulted.
std::vector<std::string> rank_environment(const std::vector<std::string>& parent_environment,
                                          const LaunchOptions& options, int local_rank, int restart_count,
                                          const std::string& error_file);

// The current process's environment as NAME=VALUE entries.
std::vector<std::string> current_environment();

}  // namespace xtrain::launch
