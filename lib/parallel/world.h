// Where this process sits in a job, read from the environment the way torchrun and SLURM set it:
//   torchrun (and `xtrain launch`): RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK,
//     MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_USE_AGENT_STORE;
//   SLURM (srun): SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID, SLURM_JOB_NODELIST's
//     first host as MASTER_ADDR and a port derived from SLURM_JOB_ID, unless MASTER_ADDR/PORT
//     are set;
//   neither: one process.
// Inconsistent values (RANK >= WORLD_SIZE, a non-number) are an InputError naming the variable.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace xtrain::parallel {

struct World {
  int64_t rank = 0;
  int64_t size = 1;
  int64_t local_rank = 0;
  int64_t local_size = 1;
  int64_t node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int64_t master_port = 29500;
  int64_t restart_count = 0;
  std::string source = "single";  // "torchrun", "slurm" or "single"
  // torchrun's agent already serves the store at MASTER_ADDR:MASTER_PORT
  // (TORCHELASTIC_USE_AGENT_STORE=True): rank 0 joins it instead of hosting one.
  bool agent_store = false;

  bool distributed() const { return size > 1; }
};

using Environment = std::function<std::optional<std::string>(const std::string& name)>;

// The process environment (getenv).
Environment process_environment();

World discover_world(const Environment& env = process_environment());

// "node[01-04,07],gpu2" -> "node01": the first host of a SLURM node list.
std::string first_slurm_host(const std::string& nodelist);

// "2(x3),1" -> 2: tasks on the first node, from SLURM_TASKS_PER_NODE.
int64_t first_slurm_tasks_per_node(const std::string& tasks_per_node);

}  // namespace xtrain::parallel
