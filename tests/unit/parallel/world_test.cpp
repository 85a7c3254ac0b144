#include <catch2/catch.hpp>

#include <map>

#include "parallel/device_mesh.h"
#include "parallel/world.h"
#include "util/input_error.h"

using namespace xtrain;

namespace {

parallel::Environment environment(std::map<std::string, std::string> values) {
  return [values](const std::string& name) -> std::optional<std::string> {
    auto it = values.find(name);
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("no launcher variables: one process", "[parallel]") {
  auto w = parallel::discover_world(environment({}));
  CHECK(w.size == 1);
  CHECK(w.rank == 0);
  CHECK(w.source == "single");
  CHECK_FALSE(w.distributed());
}

TEST_CASE("torchrun variables", "[parallel]") {
  auto w = parallel::discover_world(environment({{"RANK", "5"},
                                             {"WORLD_SIZE", "8"},
                                             {"LOCAL_RANK", "1"},
                                             {"LOCAL_WORLD_SIZE", "4"},
                                             {"GROUP_RANK", "1"},
                                             {"MASTER_ADDR", "node-a"},
                                             {"MASTER_PORT", "29601"},
                                             {"TORCHELASTIC_RESTART_COUNT", "2"},
                                             {"TORCHELASTIC_USE_AGENT_STORE", "True"}}));
  CHECK(w.source == "torchrun");
  CHECK(w.rank == 5);
  CHECK(w.size == 8);
  CHECK(w.local_rank == 1);
  CHECK(w.local_size == 4);
  CHECK(w.node_rank == 1);
  CHECK(w.master_addr == "node-a");
  CHECK(w.master_port == 29601);
  CHECK(w.restart_count == 2);
  CHECK(w.agent_store);
}

TEST_CASE("SLURM variables: first host of the node list, a port from the job id", "[parallel]") {
  auto w = parallel::discover_world(environment({{"SLURM_PROCID", "3"},
                                             {"SLURM_NTASKS", "4"},
                                             {"SLURM_LOCALID", "1"},
                                             {"SLURM_NODEID", "1"},
                                             {"SLURM_TASKS_PER_NODE", "2(x2)"},
                                             {"SLURM_JOB_NODELIST", "gpu[007-008,010],login1"},
                                             {"SLURM_JOB_ID", "123456"}}));
  CHECK(w.source == "slurm");
  CHECK(w.rank == 3);
  CHECK(w.size == 4);
  CHECK(w.local_rank == 1);
  CHECK(w.local_size == 2);
  CHECK(w.node_rank == 1);
  CHECK(w.master_addr == "gpu007");
  CHECK(w.master_port == 10000 + 123456 % 50000);
  // MASTER_ADDR / MASTER_PORT, when exported in the batch script, win.
  auto set = parallel::discover_world(environment(
      {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "4000"}}));
  CHECK(set.master_addr == "10.0.0.1");
  CHECK(set.master_port == 4000);
}

TEST_CASE("SLURM node lists", "[parallel]") {
  CHECK(parallel::first_slurm_host("node1") == "node1");
  CHECK(parallel::first_slurm_host("node[01-04]") == "node01");
  CHECK(parallel::first_slurm_host("a[3,5],b[1-2]") == "a3");
  CHECK(parallel::first_slurm_host("x-1,x-2") == "x-1");
  CHECK(parallel::first_slurm_tasks_per_node("8(x4),2") == 8);
}

TEST_CASE("inconsistent launcher variables are bad input naming the variable", "[parallel]") {
  CHECK(error_of([] { parallel::discover_world(environment({{"RANK", "4"}, {"WORLD_SIZE", "4"}})); }) ==
        "RANK=4 is not below WORLD_SIZE=4: check the launcher's settings");
  CHECK(error_of([] { parallel::discover_world(environment({{"RANK", "x"}, {"WORLD_SIZE", "4"}})); }) ==
        "environment variable RANK=x: expected a non-negative integer");
  CHECK(error_of([] {
          parallel::discover_world(environment({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}}));
        }) == "MASTER_PORT=70000 is not a TCP port (1..65535)");
}

TEST_CASE("parallel degrees: -1 takes the rest, the product must match the world", "[parallel]") {
  auto d = parallel::resolve_degrees({1, -1, 1, 1, 1}, 4);
  CHECK(d.fsdp == 4);
  d = parallel::resolve_degrees({-1, 2, 1, 1, 1}, 8);
  CHECK(d.dp == 4);
  CHECK(error_of([] { parallel::resolve_degrees({3, 1, 1, 1, 1}, 4); }) ==
        "parallel degrees dp 3 x fsdp 1 x tp 1 x pp 1 = 3 ranks, but the job has 4 (WORLD_SIZE); make the "
        "product equal the number of processes, or set one degree to -1");
  CHECK(error_of([] { parallel::resolve_degrees({-1, -1, 1, 1, 1}, 4); }) ==
        "parallel.dp and parallel.fsdp are both -1: at most one degree can take \"the rest\"");
  CHECK(error_of([] { parallel::resolve_degrees({1, -1, 1, 1, 1}, 1); }).empty());
  CHECK(error_of([] { parallel::resolve_degrees({3, -1, 1, 1, 1}, 4); }) ==
        "parallel.fsdp = -1 cannot fill the world of 4 ranks: the other degrees multiply to 3, which does not "
        "divide 4");
  d = parallel::resolve_degrees({1, -1, 2, 1, 1}, 4);  // tp is a factor of the world: fsdp takes the rest
  CHECK(d.fsdp == 2);
  d = parallel::resolve_degrees({1, -1, 2, 2, 1}, 8);  // so is pp
  CHECK(d.fsdp == 2);
  // Expert parallelism folds into the data ranks: it is no factor of the world, and divides dp x fsdp.
  CHECK(error_of([] { parallel::resolve_degrees({1, -1, 1, 1, 3}, 4); }) ==
        "parallel.ep = 3 must divide the data ranks, dp 1 x fsdp 4 = 4: experts are split over ep of them and "
        "sharded over the rest");
  CHECK(error_of([] { parallel::resolve_degrees({1, -1, 1, 1, 2}, 4); }).empty());
}
