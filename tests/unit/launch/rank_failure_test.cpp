#include <catch2/catch.hpp>

#include <csignal>
#include <string>

#include "launch/rank_failure.h"

using namespace xtrain::launch;
using Catch::Matchers::Contains;

namespace {

RankFailure killed_rank() {
  RankFailure f;
  f.rank = 5;
  f.local_rank = 1;
  f.node_rank = 2;
  f.host = "node-c";
  f.pid = 4242;
  f.signal = SIGKILL;
  f.time = 1700000000;
  f.error_file = "/logs/attempt_0/rank_5.error.json";
  return f;
}

}  // namespace

TEST_CASE("launch failure report: a rank killed by a signal", "[launch]") {
  const std::string report = failure_report("xtrain train r.yaml", killed_rank(), {});
  CHECK_THAT(report, Contains("xtrain train r.yaml FAILED"));
  CHECK_THAT(report, Contains("<NO_OTHER_FAILURES>"));
  CHECK_THAT(report, Contains("Root Cause (first observed failure):\n[5]:"));
  CHECK_THAT(report, Contains("  host      : node-c\n"));
  CHECK_THAT(report, Contains("  rank      : 5 (local_rank: 1)\n"));
  CHECK_THAT(report, Contains("  exitcode  : -9 (pid: 4242)\n"));
  CHECK_THAT(report, Contains("  signal    : SIGKILL\n"));
  CHECK_THAT(report, Contains("  error_file: <N/A>\n"));  // the rank wrote none
  CHECK(describe(killed_rank()) == "rank 5 (local_rank 1 on node-c) was killed by SIGKILL");
}

TEST_CASE("launch failure report: an exit code and the rank's own message", "[launch]") {
  auto f = killed_rank();
  f.signal = 0;
  f.exit_code = 2;
  f.error = ErrorRecord{"InputError: a.yaml:1:1: x: bad\nsecond line", "a.yaml:1:1: x: bad\nsecond line", 1};
  auto other = killed_rank();
  other.rank = 4;
  const std::string report = failure_report("t", f, {other});
  CHECK_THAT(report, Contains("  exitcode  : 2 (pid: 4242)\n"));
  CHECK_THAT(report, Contains("  error_file: /logs/attempt_0/rank_5.error.json\n"));
  CHECK_THAT(report, Contains("  message   : InputError: a.yaml:1:1: x: bad\n              second line\n"));
  const std::string root_block = report.substr(report.find("Root Cause"));
  CHECK_THAT(root_block, !Contains("traceback"));  // the trace adds nothing to the message
  CHECK_THAT(report, Contains("Failures:\n[4]:"));
  CHECK(describe(f) == "rank 5 (local_rank 1 on node-c) exited with code 2: InputError: a.yaml:1:1: x: bad");
}

TEST_CASE("launch failure: JSON round trip between launchers", "[launch]") {
  auto f = killed_rank();
  f.error = ErrorRecord{"E: m", "trace", 7};
  const auto back = failure_from_json_text(to_json_text(f));
  CHECK(back.rank == 5);
  CHECK(back.node_rank == 2);
  CHECK(back.host == "node-c");
  CHECK(back.signal == SIGKILL);
  CHECK(back.error_file == f.error_file);
  REQUIRE(back.error);
  CHECK(back.error->message == "E: m");
  CHECK(back.error->callstack == "trace");
  CHECK(!failure_from_json_text(to_json_text(killed_rank())).error);
}

TEST_CASE("launch failure: signal names", "[launch]") {
  CHECK(signal_name(SIGKILL) == "SIGKILL");
  CHECK(signal_name(SIGSEGV) == "SIGSEGV");
  CHECK(signal_name(63) == "signal 63");
}
