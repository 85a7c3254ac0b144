#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <catch2/catch.hpp>

#include "config/pipeline_layout.h"

namespace {

using xtrain::config::PipelineAction;
using xtrain::config::PpSchedule;
using Part = PipelineAction::Part;

// Per rank, the most micro batches whose forward ran and whose activations are not yet let go.
int64_t peak_held(const std::vector<PipelineAction>& actions) {
  int64_t held = 0, peak = 0;
  for (const auto& action : actions) {
    held += action.forward ? 1 : action.releases() ? -1 : 0;
    peak = std::max(peak, held);
  }
  return peak;
}

}  // namespace

TEST_CASE("pipeline_actions zb_h1: each micro batch's F, then I, then W, at 1f1b's peak of pp held",
          "[pipeline_layout]") {
  for (int64_t stages : {2, 4}) {
    for (int64_t micro_batches : {1, 3, 4, 8, 16}) {
      for (int64_t rank = 0; rank < stages; ++rank) {
        const auto zb = xtrain::config::pipeline_actions(PpSchedule::zb_h1, stages, 1, rank, micro_batches);
        const auto one = xtrain::config::pipeline_actions(PpSchedule::one_f_one_b, stages, 1, rank, micro_batches);
        REQUIRE(zb.size() == 3 * static_cast<size_t>(micro_batches));
        std::map<int64_t, std::string> seen;  // by micro batch, the parts so far
        std::vector<std::pair<bool, int64_t>> forwards_and_inputs;
        for (const auto& a : zb) {
          auto& parts = seen[a.micro_batch];
          const char kind = a.forward ? 'F' : a.part == Part::input ? 'I' : 'W';
          REQUIRE((a.forward || a.part != Part::whole));
          parts += kind;
          if (kind != 'W') forwards_and_inputs.emplace_back(a.forward, a.micro_batch);
        }
        for (const auto& [m, parts] : seen) CHECK(parts == "FIW");
        // Without the Ws, 1f1b's order.
        std::vector<std::pair<bool, int64_t>> expected;
        for (const auto& a : one) expected.emplace_back(a.forward, a.micro_batch);
        CHECK(forwards_and_inputs == expected);
        CHECK(peak_held(zb) <= std::min(stages, micro_batches));
        CHECK(peak_held(one) <= peak_held(zb));
      }
    }
  }
}

TEST_CASE("pipeline_actions zb_h1 is PyTorch's ScheduleInterleavedZeroBubble with one chunk per rank",
          "[pipeline_layout]") {
  // Written by scripts/pipeline_orders.py --write (torch.distributed.pipelining, 4 stages, 8
  // micro batches, empty slots left out).
  std::ifstream file(std::string(XTRAIN_SOURCE_DIR) + "/tests/data/pipeline/zb_h1_pytorch_4x8.txt");
  REQUIRE(file);
  std::stringstream expected;
  expected << file.rdbuf();
  CHECK(xtrain::config::format_pipeline_actions(PpSchedule::zb_h1, 4, 1, 8) == expected.str());
}

TEST_CASE("format_pipeline_actions: 1f1b on 2 stages in PyTorch's notation", "[pipeline_layout]") {
  CHECK(xtrain::config::format_pipeline_actions(PpSchedule::one_f_one_b, 2, 1, 3) ==
        "rank 0: 0F0 0F1 0B0 0F2 0B1 0B2\nrank 1: 1F0 1B0 1F1 1B1 1F2 1B2\n");
}
