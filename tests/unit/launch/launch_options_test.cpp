#include <catch2/catch.hpp>

#include <string>

#include "launch/launch_options.h"
#include "util/input_error.h"

using namespace xtrain::launch;
using Catch::Matchers::Contains;
using xtrain::InputError;

namespace {

LaunchOptions valid() {
  LaunchOptions options;
  options.nproc_per_node = 2;
  options.command = {"train", "recipe.yaml"};
  options.command_given = true;
  return options;
}

}  // namespace

TEST_CASE("launch options: inconsistent values are bad input that names the option", "[launch]") {
  CHECK_NOTHROW(check_launch_options(valid()));
  auto options = valid();
  SECTION("no ranks") {
    options.nproc_per_node = 0;
    CHECK_THROWS_WITH(check_launch_options(options), Contains("--nproc-per-node must be at least 1, got 0"));
  }
  SECTION("node rank outside the job") {
    options.nnodes = 2;
    options.node_rank = 2;
    CHECK_THROWS_WITH(check_launch_options(options), Contains("--node-rank 2 is outside 0..1"));
  }
  SECTION("no command after --") {
    options.command_given = false;
    options.command.clear();
    CHECK_THROWS_WITH(check_launch_options(options), Contains("missing the command after `--`"));
  }
  SECTION("-- with nothing after it") {
    options.command.clear();
    CHECK_THROWS_AS(check_launch_options(options), InputError);
  }
  SECTION("negative restarts") {
    options.max_restarts = -1;
    CHECK_THROWS_WITH(check_launch_options(options), Contains("--max-restarts"));
  }
  SECTION("several nodes need the port after the master port") {
    options.nnodes = 2;
    options.master_port = 65535;
    CHECK_THROWS_WITH(check_launch_options(options), Contains("--master-port must be in 1..65534"));
  }
}

TEST_CASE("launch options: defaults follow torchrun", "[launch]") {
  auto one_node = resolve_launch_options(valid());
  CHECK(one_node.master_port > 0);  // a free port, as torchrun --standalone picks
  CHECK(one_node.run_id.size() == 16);
  CHECK(one_node.program.find('/') == 0);  // this executable, absolute

  auto options = valid();
  options.nnodes = 2;
  auto two_nodes = resolve_launch_options(options);
  CHECK(two_nodes.master_port == 29500);
  CHECK(two_nodes.run_id == "none");
}

TEST_CASE("launch options: the program is searched on PATH", "[launch]") {
  CHECK(resolve_program("sh").find("/sh") != std::string::npos);
  CHECK(resolve_program("/bin/sh") == "/bin/sh");
  CHECK_THROWS_WITH(resolve_program("no-such-program-xyz"),
                    Contains("--program no-such-program-xyz: not found on PATH"));
  CHECK_THROWS_WITH(resolve_program("/no/such/file"), Contains("no executable file"));
  CHECK_THROWS_AS(resolve_program("/tmp"), InputError);  // a folder is not a program
}
