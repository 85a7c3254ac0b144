#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "launch/rank_environment.h"

using namespace xtrain::launch;

namespace {

LaunchOptions two_nodes_of_four() {
  LaunchOptions options;
  options.nproc_per_node = 4;
  options.nnodes = 2;
  options.node_rank = 1;
  options.master_addr = "node-a";
  options.master_port = 29600;
  options.max_restarts = 3;
  options.run_id = "job-7";
  return options;
}

std::map<std::string, std::string> as_map(const std::vector<std::string>& environment) {
  std::map<std::string, std::string> variables;
  for (const auto& entry : environment) {
    const auto eq = entry.find('=');
    REQUIRE(variables.count(entry.substr(0, eq)) == 0);  // every name once
    variables[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return variables;
}

}  // namespace

TEST_CASE("launch env: torchrun variables place a rank in the job", "[launch]") {
  const auto v = torchrun_variables(two_nodes_of_four(), 2, 1, "/logs/attempt_1/rank_6.error.json");
  CHECK(v.at("RANK") == "6");  // node 1 * 4 ranks per node + local rank 2
  CHECK(v.at("WORLD_SIZE") == "8");
  CHECK(v.at("LOCAL_RANK") == "2");
  CHECK(v.at("LOCAL_WORLD_SIZE") == "4");
  CHECK(v.at("GROUP_RANK") == "1");
  CHECK(v.at("GROUP_WORLD_SIZE") == "2");
  CHECK(v.at("ROLE_NAME") == "default");
  CHECK(v.at("ROLE_RANK") == "6");
  CHECK(v.at("ROLE_WORLD_SIZE") == "8");
  CHECK(v.at("MASTER_ADDR") == "node-a");
  CHECK(v.at("MASTER_PORT") == "29600");
  CHECK(v.at("TORCHELASTIC_RESTART_COUNT") == "1");
  CHECK(v.at("TORCHELASTIC_MAX_RESTARTS") == "3");
  CHECK(v.at("TORCHELASTIC_RUN_ID") == "job-7");
  CHECK(v.at("TORCHELASTIC_ERROR_FILE") == "/logs/attempt_1/rank_6.error.json");
  CHECK(v.at("TORCHELASTIC_USE_AGENT_STORE") == "False");  // rank 0 hosts the ranks' store
}

TEST_CASE("launch env: every rank of a job gets a distinct global rank", "[launch]") {
  auto options = two_nodes_of_four();
  std::vector<int> ranks;
  for (int node = 0; node < options.nnodes; ++node)
    for (int local = 0; local < options.nproc_per_node; ++local) {
      options.node_rank = node;
      ranks.push_back(std::stoi(torchrun_variables(options, local, 0, "e").at("RANK")));
    }
  CHECK(ranks == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
}

TEST_CASE("launch env: the launcher's variables are kept, its torchrun ones replaced", "[launch]") {
  const std::vector<std::string> parent = {"PATH=/usr/bin", "RANK=99", "WORLD_SIZE=1", "HOME=/root", "A=b=c"};
  const auto env = as_map(rank_environment(parent, two_nodes_of_four(), 0, 0, "e.json"));
  CHECK(env.at("PATH") == "/usr/bin");
  CHECK(env.at("HOME") == "/root");
  CHECK(env.at("A") == "b=c");
  CHECK(env.at("RANK") == "4");
  CHECK(env.at("WORLD_SIZE") == "8");
  CHECK(env.at("TORCHELASTIC_RESTART_COUNT") == "0");
}

TEST_CASE("launch env: OMP_NUM_THREADS defaults to 1 only for several ranks and only when unset", "[launch]") {
  auto options = two_nodes_of_four();
  SECTION("several ranks, unset: 1") {
    CHECK(defaults_omp_num_threads({"PATH=/bin"}, options));
    CHECK(as_map(rank_environment({"PATH=/bin"}, options, 0, 0, "e")).at("OMP_NUM_THREADS") == "1");
  }
  SECTION("set by the user: kept") {
    CHECK_FALSE(defaults_omp_num_threads({"OMP_NUM_THREADS=6"}, options));
    CHECK(as_map(rank_environment({"OMP_NUM_THREADS=6"}, options, 0, 0, "e")).at("OMP_NUM_THREADS") == "6");
  }
  SECTION("one rank per node: left alone") {
    options.nproc_per_node = 1;
    CHECK_FALSE(defaults_omp_num_threads({"PATH=/bin"}, options));
    CHECK(as_map(rank_environment({"PATH=/bin"}, options, 0, 0, "e")).count("OMP_NUM_THREADS") == 0);
  }
}
