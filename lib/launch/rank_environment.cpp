#include "launch/rank_environment.h"

#include <unistd.h>  // environ (a GNU extension, with C linkage: declared once, by it)

#include <algorithm>

namespace xtrain::launch {
namespace {

std::string name_of(const std::string& entry) { return entry.substr(0, entry.find('=')); }

bool has_variable(const std::vector<std::string>& environment, const std::string& name) {
  return std::any_of(environment.begin(), environment.end(),
                     [&](const std::string& entry) { return name_of(entry) == name; });
}

}  // namespace

std::map<std::string, std::string> torchrun_variables(const LaunchOptions& o, int local_rank, int restart_count,
                                                      const std::string& error_file) {
  const int rank = o.node_rank * o.nproc_per_node + local_rank;
  const int world_size = o.nnodes * o.nproc_per_node;
  auto text = [](int value) { return std::to_string(value); };
  return {
      {"RANK", text(rank)},
      {"WORLD_SIZE", text(world_size)},
      {"LOCAL_RANK", text(local_rank)},
      {"LOCAL_WORLD_SIZE", text(o.nproc_per_node)},
      {"GROUP_RANK", text(o.node_rank)},
      {"GROUP_WORLD_SIZE", text(o.nnodes)},
      // One role ("default") runs every rank, so role ranks are the global ones.
      {"ROLE_NAME", "default"},
      {"ROLE_RANK", text(rank)},
      {"ROLE_WORLD_SIZE", text(world_size)},
      {"MASTER_ADDR", o.master_addr},
      {"MASTER_PORT", text(o.master_port)},
      {"TORCHELASTIC_RESTART_COUNT", text(restart_count)},
      {"TORCHELASTIC_MAX_RESTARTS", text(o.max_restarts)},
      {"TORCHELASTIC_RUN_ID", o.run_id},
      {"TORCHELASTIC_ERROR_FILE", error_file},
      // torchrun says whether its agent serves the ranks' store on MASTER_PORT; this launcher
      // never does (rank 0 hosts it), and a "True" inherited from an outer launcher would
      // leave rank 0 waiting for a store nobody serves.
      {"TORCHELASTIC_USE_AGENT_STORE", "False"},
  };
}

bool defaults_omp_num_threads(const std::vector<std::string>& parent_environment, const LaunchOptions& options) {
  return options.nproc_per_node > 1 && !has_variable(parent_environment, "OMP_NUM_THREADS");
}

std::vector<std::string> rank_environment(const std::vector<std::string>& parent_environment,
                                          const LaunchOptions& options, int local_rank, int restart_count,
                                          const std::string& error_file) {
  const auto variables = torchrun_variables(options, local_rank, restart_count, error_file);
  std::vector<std::string> environment;
  for (const auto& entry : parent_environment)
    if (variables.count(name_of(entry)) == 0) environment.push_back(entry);
  for (const auto& [name, value] : variables) environment.push_back(name + "=" + value);
  if (defaults_omp_num_threads(parent_environment, options)) environment.push_back("OMP_NUM_THREADS=1");
  return environment;
}

std::vector<std::string> current_environment() {
  std::vector<std::string> environment;
  for (char** entry = environ; *entry != nullptr; ++entry) environment.emplace_back(*entry);
  return environment;
}

}  // namespace xtrain::launch
