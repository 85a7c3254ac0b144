#include <catch2/catch.hpp>

#include <string>

#include "util/input_error.h"
#include "util/test_faults.h"

using xtrain::InputError;
using namespace xtrain::util;

TEST_CASE("XTRAIN_FAULT values name an action, a rank and a step or, for spike, a range", "[util][test_faults]") {
  CHECK_FALSE(parse_run_fault("").has_value());
  const auto kill = parse_run_fault("kill:1:8");
  REQUIRE(kill);
  CHECK(kill->action == "kill");
  CHECK(kill->rank == 1);
  CHECK(kill->step == 8);
  CHECK(kill->last_step == 8);
  for (const char* action : {"kill_in_save", "stall", "stall_in_step", "fail", "spike"})
    CHECK(parse_run_fault(std::string(action) + ":0:3")->action == action);
  const auto spike = parse_run_fault("spike:0:8-9");
  REQUIRE(spike);
  CHECK(spike->step == 8);
  CHECK(spike->last_step == 9);
}

TEST_CASE("XTRAIN_HEALTH_FAULT values name the slow or the corrupt rank", "[util][test_faults]") {
  CHECK(parse_health_fault("").slow_rank == -1);
  CHECK(parse_health_fault("").corrupt_rank == -1);
  CHECK(parse_health_fault("slow:2").slow_rank == 2);
  CHECK(parse_health_fault("slow:2").corrupt_rank == -1);
  CHECK(parse_health_fault("corrupt:3").corrupt_rank == 3);
  CHECK(parse_health_fault("corrupt:3").slow_rank == -1);
}

TEST_CASE("every test fault is refused in one style: the variable, its value, the problem and the expected forms",
          "[util][test_faults]") {
  const std::string run =
      "expected kill:<rank>:<step>, kill_in_save:<rank>:<step>, stall:<rank>:<step>, stall_in_step:<rank>:<step>, "
      "fail:<rank>:<step> or spike:<rank>:<step>[-<last step>]";
  CHECK_THROWS_WITH(parse_run_fault("explode:1:8"), "XTRAIN_FAULT=explode:1:8: unknown fault 'explode' (" + run + ")");
  CHECK_THROWS_WITH(parse_run_fault("kill:1"), "XTRAIN_FAULT=kill:1: " + run);
  CHECK_THROWS_WITH(parse_run_fault("kill:1:8:9"), "XTRAIN_FAULT=kill:1:8:9: " + run);
  CHECK_THROWS_WITH(parse_run_fault("kill::8"), "XTRAIN_FAULT=kill::8: " + run);
  CHECK_THROWS_WITH(parse_run_fault("kill:-1:8"), "XTRAIN_FAULT=kill:-1:8: '-1' is not a rank (" + run + ")");
  CHECK_THROWS_WITH(parse_run_fault("kill:1:8x"), "XTRAIN_FAULT=kill:1:8x: '8x' is not a step (" + run + ")");
  CHECK_THROWS_WITH(parse_run_fault("kill:1:8-9"), "XTRAIN_FAULT=kill:1:8-9: '8-9' is not a step (" + run + ")");
  CHECK_THROWS_WITH(parse_run_fault("spike:0:9-8"),
                    "XTRAIN_FAULT=spike:0:9-8: '9-8' is not a step or a range of steps (" + run + ")");
  CHECK_THROWS_AS(parse_run_fault("spike:0:8-"), InputError);

  const std::string health = "expected slow:<rank> or corrupt:<rank>";
  CHECK_THROWS_WITH(parse_health_fault("fast:1"), "XTRAIN_HEALTH_FAULT=fast:1: unknown fault 'fast' (" + health + ")");
  CHECK_THROWS_WITH(parse_health_fault("slow"), "XTRAIN_HEALTH_FAULT=slow: " + health);
  CHECK_THROWS_WITH(parse_health_fault("slow:x"), "XTRAIN_HEALTH_FAULT=slow:x: 'x' is not a rank (" + health + ")");
  CHECK_THROWS_WITH(parse_health_fault("slow:1:2"), "XTRAIN_HEALTH_FAULT=slow:1:2: " + health);
}
