#include "parallel/world.h"

#include <cstdlib>

#include <fmt/format.h>

#include "util/input_error.h"

namespace xtrain::parallel {
namespace {

int64_t parse_count(const Environment& env, const std::string& name, int64_t fallback) {
  auto value = env(name);
  if (!value || value->empty()) return fallback;
  try {
    size_t used = 0;
    const int64_t number = std::stoll(*value, &used);
    if (used == value->size() && number >= 0) return number;
  } catch (const std::exception&) {
  }
  throw InputError(fmt::format("environment variable {}={}: expected a non-negative integer", name, *value));
}

void check_world(const World& w, const std::string& rank_var, const std::string& size_var) {
  if (w.size < 1) throw InputError(fmt::format("{}={}: a job needs at least one process", size_var, w.size));
  if (w.rank >= w.size)
    throw InputError(fmt::format("{}={} is not below {}={}: check the launcher's settings", rank_var, w.rank,
                                 size_var, w.size));
  if (w.local_size < 1 || w.local_rank >= w.local_size)
    throw InputError(fmt::format("local rank {} is not below the local world size {}", w.local_rank, w.local_size));
  if (w.master_port < 1 || w.master_port > 65535)
    throw InputError(fmt::format("MASTER_PORT={} is not a TCP port (1..65535)", w.master_port));
}

}  // namespace

Environment process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (!value) return std::nullopt;
    return std::string(value);
  };
}

std::string first_slurm_host(const std::string& nodelist) {
  // The first entry ends at a comma outside brackets; its range list, if any, starts at '['.
  size_t end = 0;
  int depth = 0;
  for (; end < nodelist.size(); ++end) {
    if (nodelist[end] == '[') ++depth;
    if (nodelist[end] == ']') --depth;
    if (nodelist[end] == ',' && depth == 0) break;
  }
  const std::string entry = nodelist.substr(0, end);
  const size_t open = entry.find('[');
  if (open == std::string::npos) return entry;
  // "node[01-04,07]": the first number of the first range keeps its zero padding.
  const std::string ranges = entry.substr(open + 1);
  const size_t stop = ranges.find_first_of("-,]");
  return entry.substr(0, open) + ranges.substr(0, stop);
}

int64_t first_slurm_tasks_per_node(const std::string& tasks_per_node) {
  try {
    return std::stoll(tasks_per_node);  // "2(x3),1": the leading number
  } catch (const std::exception&) {
    throw InputError(fmt::format("SLURM_TASKS_PER_NODE={}: expected a form like 2(x3),1", tasks_per_node));
  }
}

World discover_world(const Environment& env) {
  World w;
  if (env("RANK") || env("WORLD_SIZE")) {
    w.source = "torchrun";
    w.rank = parse_count(env, "RANK", 0);
    w.size = parse_count(env, "WORLD_SIZE", 1);
    w.local_rank = parse_count(env, "LOCAL_RANK", w.rank);
    w.local_size = parse_count(env, "LOCAL_WORLD_SIZE", w.size);
    w.node_rank = parse_count(env, "GROUP_RANK", 0);
    w.master_addr = env("MASTER_ADDR").value_or("127.0.0.1");
    w.master_port = parse_count(env, "MASTER_PORT", 29500);
    w.restart_count = parse_count(env, "TORCHELASTIC_RESTART_COUNT", 0);
    w.agent_store = env("TORCHELASTIC_USE_AGENT_STORE").value_or("") == "True";
    check_world(w, "RANK", "WORLD_SIZE");
    return w;
  }
  if (env("SLURM_PROCID") && env("SLURM_NTASKS")) {
    w.source = "slurm";
    w.rank = parse_count(env, "SLURM_PROCID", 0);
    w.size = parse_count(env, "SLURM_NTASKS", 1);
    w.local_rank = parse_count(env, "SLURM_LOCALID", 0);
    if (auto per_node = env("SLURM_NTASKS_PER_NODE"))
      w.local_size = parse_count(env, "SLURM_NTASKS_PER_NODE", 1);
    else if (auto tasks = env("SLURM_TASKS_PER_NODE"))
      w.local_size = first_slurm_tasks_per_node(*tasks);
    else
      w.local_size = w.size;
    w.node_rank = parse_count(env, "SLURM_NODEID", 0);
    if (auto addr = env("MASTER_ADDR"))
      w.master_addr = *addr;
    else if (auto nodes = env("SLURM_JOB_NODELIST"))
      w.master_addr = first_slurm_host(*nodes);
    else if (auto nodes_old = env("SLURM_NODELIST"))
      w.master_addr = first_slurm_host(*nodes_old);
    // Jobs sharing a node must not share a port: derive it from the job id, as Lightning does.
    w.master_port = env("MASTER_PORT") ? parse_count(env, "MASTER_PORT", 29500)
                                       : 10000 + parse_count(env, "SLURM_JOB_ID", 0) % 50000;
    w.restart_count = parse_count(env, "SLURM_RESTART_COUNT", 0);
    check_world(w, "SLURM_PROCID", "SLURM_NTASKS");
    return w;
  }
  return w;
}

}  // namespace xtrain::parallel
