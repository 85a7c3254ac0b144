#include <catch2/catch.hpp>

#include <string>

#include <fmt/format.h>

#include "launch/data_positions.h"
#include "scratch_dir.h"
#include "util/input_error.h"

using namespace xtrain::launch;
using xtrain::testing::ScratchDir;

namespace {

// A step's record as train/step_report.cpp writes it (the fields the check reads, and a loss).
std::string step_line(int64_t step, int64_t position, int64_t samples = 8) {
  return fmt::format(R"({{"step":{},"loss":3.5,"data.position":{},"data.samples":{},"data.epoch":0,"data.offset":{}}})",
                     step, position, samples, position) +
         "\n";
}

// Steps first..last of a whole run of global batch 8, with a checkpoint and an eval record.
std::string steps(int64_t first, int64_t last) {
  std::string text;
  for (int64_t step = first; step <= last; ++step) {
    text += step_line(step, (step - 1) * 8);
    if (step % 3 == 0) text += fmt::format(R"({{"step":{},"checkpoint":"step_{}"}})", step, step) + "\n";
  }
  return text;
}

DataPositions check(const std::string& metrics) {
  ScratchDir dir;
  dir.write("metrics.jsonl", metrics);
  return check_data_positions(dir.path().string());
}

}  // namespace

TEST_CASE("a whole run reads each global batch once, in order", "[launch]") {
  const auto positions = check(steps(1, 6) + R"({"step":6,"eval_loss":3.1})" "\n");
  CHECK(positions.faults.empty());
  CHECK(positions.steps == 6);
  CHECK(data_positions_report(positions) ==
        "data: steps 1..6 read samples 0..47 in order, each global batch once: none skipped or repeated\n");
}

TEST_CASE("a step re-run with another data position is a fault", "[launch]") {
  SECTION("recorded twice, the second time past its batch: samples skipped") {
    const auto positions = check(steps(1, 5) + step_line(5, 40) + step_line(6, 48));
    REQUIRE(positions.faults.size() == 2);
    CHECK(positions.faults[0] ==
          "step 5 is recorded twice (lines 6 and 7) with no resume or rollback between: samples 32..39, then 40..47");
    CHECK(positions.faults[1] == "step 5 read samples 40..47: samples 32..39 after step 4's batch were skipped");
  }
  SECTION("a resume that restored the wrong position: samples read again") {
    const auto positions = check(steps(1, 4) + step_line(5, 24) + step_line(6, 32));
    REQUIRE(positions.faults.size() == 1);
    CHECK(positions.faults[0] == "step 5 read samples 24..31: samples 24..31 were read again (step 4's batch ended "
                                 "at sample 31)");
    CHECK(data_positions_report(positions) ==
          "data: 1 fault in the data positions of steps 1..6:\n  step 5 read samples 24..31: samples 24..31 were "
          "read again (step 4's batch ended at sample 31)\n");
  }
  SECTION("a step missing") {
    const auto positions = check(steps(1, 3) + step_line(5, 32));
    REQUIRE(positions.faults.size() == 1);
    CHECK(positions.faults[0] == "steps 4..4 have no record");
  }
}

TEST_CASE("a rollback's skip is the one it records", "[launch]") {
  const std::string rollback = R"({"step":5,"rollback_to":3,"skipped_samples":[24,40]})" "\n";
  const auto positions = check(steps(1, 5) + rollback + step_line(4, 40) + step_line(5, 48));
  CHECK(positions.faults.empty());
  CHECK(positions.rollback_skips == 16);
  CHECK(data_positions_report(positions) == "data: steps 1..5 read samples 0..55 in order, each global batch once: "
                                            "none skipped or repeated (16 skipped on purpose by rollbacks)\n");
  // Past what the rollback names, the skip is a fault again.
  const auto further = check(steps(1, 5) + rollback + step_line(4, 48) + step_line(5, 56));
  REQUIRE(further.faults.size() == 1);
  CHECK(further.faults[0] == "step 4 read samples 48..55: samples 24..47 after step 3's batch were skipped");
}

TEST_CASE("records without data positions, and a missing file", "[launch]") {
  const auto positions = check(R"({"step":1,"loss":3.5})" "\n");
  CHECK(positions.steps == 0);
  CHECK(positions.faults.empty());
  ScratchDir empty;
  CHECK_THROWS_AS(check_data_positions(empty.path().string()), xtrain::InputError);
  CHECK_THROWS_WITH(check("{\"step\":1,\"data.position\":\"x\"}\n"), Catch::Matchers::Contains("metrics.jsonl:1: not a JSON record"));
}
