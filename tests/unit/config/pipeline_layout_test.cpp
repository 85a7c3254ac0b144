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

TEST_CASE("pipeline_actions zbv is PyTorch's ScheduleZBVZeroBubble", "[pipeline_layout]") {
  // Written by scripts/pipeline_orders.py --write, as zb_h1's.
  std::ifstream file(std::string(XTRAIN_SOURCE_DIR) + "/tests/data/pipeline/zbv_pytorch_4x8.txt");
  REQUIRE(file);
  std::stringstream expected;
  expected << file.rdbuf();
  CHECK(xtrain::config::format_pipeline_actions(PpSchedule::zbv, 4, 2, 8) == expected.str());
}

TEST_CASE("pipeline_actions zbv: every chunk's micro batches F, I, W once each, fewer than 2 pp - 1 too",
          "[pipeline_layout]") {
  for (int64_t stages : {2, 3, 4})
    for (int64_t micro_batches : {1, 2, 5, 8}) {
      // Every rank's actions per (chunk, micro batch) in the order F, I, W.
      for (int64_t rank = 0; rank < stages; ++rank) {
        std::map<std::pair<int64_t, int64_t>, std::string> seen;
        for (const auto& a : xtrain::config::pipeline_actions(PpSchedule::zbv, stages, 2, rank, micro_batches))
          seen[{a.chunk, a.micro_batch}] += a.forward ? 'F' : a.part == Part::input ? 'I' : 'W';
        REQUIRE(seen.size() == 2 * static_cast<size_t>(micro_batches));
        for (const auto& [key, parts] : seen) CHECK(parts == "FIW");
      }
    }
}

TEST_CASE("pipeline_actions dualpipev is PyTorch's ScheduleDualPipeV", "[pipeline_layout]") {
  // Written by scripts/pipeline_orders.py --write, as zb_h1's; the overlapped forward-backward
  // pairs in PyTorch's notation, "(0F7;7B3)OVERLAP_F_B".
  std::ifstream file(std::string(XTRAIN_SOURCE_DIR) + "/tests/data/pipeline/dualpipev_pytorch_4x8.txt");
  REQUIRE(file);
  std::stringstream expected;
  expected << file.rdbuf();
  CHECK(xtrain::config::format_pipeline_actions(PpSchedule::dualpipev, 4, 2, 8) == expected.str());
}

TEST_CASE("pipeline_actions dualpipev: each micro batch's F, then B or I and W, pairs of the two chunks, "
          "2 pp + 1 held",
          "[pipeline_layout]") {
  for (int64_t stages : {2, 3, 4})
    for (int64_t extra : {0, 1, 5}) {
      const int64_t micro_batches = xtrain::config::min_micro_batches(PpSchedule::dualpipev, stages) + extra;
      for (int64_t rank = 0; rank < stages; ++rank) {
        const auto actions = xtrain::config::pipeline_actions(PpSchedule::dualpipev, stages, 2, rank, micro_batches);
        std::map<std::pair<int64_t, int64_t>, std::string> seen;
        int64_t pairs = 0;
        for (size_t i = 0; i < actions.size(); ++i) {
          const auto& a = actions[i];
          seen[{a.chunk, a.micro_batch}] += a.forward                  ? 'F'
                                            : a.part == Part::input  ? 'I'
                                            : a.part == Part::weight ? 'W'
                                                                     : 'B';
          if (!a.overlapped) continue;
          ++pairs;
          REQUIRE(i + 1 < actions.size());
          CHECK((a.forward && !actions[i + 1].forward && actions[i + 1].part == Part::whole));
          CHECK(actions[i + 1].chunk == 1 - a.chunk);
        }
        REQUIRE(seen.size() == 2 * static_cast<size_t>(micro_batches));
        for (const auto& [key, parts] : seen) CHECK((parts == "FB" || parts == "FIW"));
        // PyTorch's steady state: two pairs a round, the last rank's first round one.
        CHECK(pairs == 2 * (micro_batches - 2 * stages + rank + 1) - (rank == stages - 1) + (stages - rank - 1));
        // DualPipe's PP + 1 chunks' activations, PP = 2 pp chunks, on every rank; zbv holds 2 pp.
        CHECK(peak_held(actions) == 2 * stages + 1);
      }
    }
  // Fewer than 2 pp (refused for training) still give each chunk's micro batches once, for the
  // planner.
  for (int64_t rank = 0; rank < 4; ++rank) {
    std::set<std::pair<int64_t, int64_t>> forwards;
    for (const auto& a : xtrain::config::pipeline_actions(PpSchedule::dualpipev, 4, 2, rank, 3))
      if (a.forward) CHECK(forwards.insert({a.chunk, a.micro_batch}).second);
    CHECK(forwards.size() == 6);
  }
  CHECK(xtrain::config::min_micro_batches(PpSchedule::dualpipev, 4) == 8);
  CHECK(xtrain::config::min_micro_batches(PpSchedule::zbv, 4) == 1);
  CHECK(xtrain::config::pipeline_placement(PpSchedule::dualpipev, 4, 2).head_rank() == 0);
}

TEST_CASE("pipeline placement: chunk c on rank c mod pp, or zbv's V", "[pipeline_layout]") {
  const auto loop = xtrain::config::pipeline_placement(PpSchedule::interleaved_1f1b, 4, 2);
  CHECK(loop.global_chunk(1, 1) == 5);
  CHECK(loop.rank_of(5) == 1);
  CHECK(loop.head_rank() == 3);
  const auto v = xtrain::config::pipeline_placement(PpSchedule::zbv, 4, 2);
  for (int64_t rank = 0; rank < 4; ++rank) {
    CHECK(v.global_chunk(rank, 0) == rank);
    CHECK(v.global_chunk(rank, 1) == 7 - rank);
    CHECK(v.rank_of(v.global_chunk(rank, 1)) == rank);
  }
  CHECK(v.head_rank() == 0);
}

TEST_CASE("format_pipeline_actions: 1f1b on 2 stages in PyTorch's notation", "[pipeline_layout]") {
  CHECK(xtrain::config::format_pipeline_actions(PpSchedule::one_f_one_b, 2, 1, 3) ==
        "rank 0: 0F0 0F1 0B0 0F2 0B1 0B2\nrank 1: 1F0 1B0 1F1 1B1 1F2 1B2\n");
}

namespace {
// "first-last" per chunk, E and H marking the ends.
std::string describe(const std::vector<xtrain::config::PipelineChunk>& chunks) {
  std::string text;
  for (const auto& c : chunks)
    text += (c.embedding ? "E" : "") + std::to_string(c.first_layer) + "-" + std::to_string(c.last_layer) +
            (c.head ? "H" : "") + " ";
  return text;
}
}  // namespace

TEST_CASE("pipeline_chunks: the ends count as a layer each, prediction depths after the head on the last chunk",
          "[pipeline_layout]") {
  using xtrain::config::pipeline_chunks;
  CHECK(describe(pipeline_chunks(6, 2)) == "E0-3 3-6H ");
  CHECK(describe(pipeline_chunks(2, 4)) == "E0-0 0-1 1-2 2-2H ");
  // 2 layers and 2 depths: the embedding and the layers, then the head and the depths (layers 2, 3).
  CHECK(describe(pipeline_chunks(2, 2, 2)) == "E0-2 2-4H ");
  // The depths' slots would take the last three chunks' cuts: the layers still get one chunk each.
  CHECK(describe(pipeline_chunks(2, 4, 2)) == "E0-0 0-1 1-2 2-4H ");
  CHECK(describe(pipeline_chunks(6, 4, 2)) == "E0-1 1-4 4-6 6-8H ");
  CHECK_THROWS_AS(pipeline_chunks(2, 5, 2), std::invalid_argument);
}

TEST_CASE("pipeline_chunks: parallel.pp_layers cuts where it says, and says what is wrong with a bad list",
          "[pipeline_layout]") {
  using xtrain::config::pipeline_chunks;
  CHECK(describe(pipeline_chunks(14, 4, 0, {4, 4, 3, 3})) == "E0-4 4-8 8-11 11-14H ");
  // The first chunk may hold the embedding alone and the last the head (and depths) alone.
  CHECK(describe(pipeline_chunks(4, 4, 2, {0, 2, 2, 0})) == "E0-0 0-2 2-4 4-6H ");
  CHECK(describe(pipeline_chunks(6, 2, 0, {})) == describe(pipeline_chunks(6, 2)));
  auto problem = [](int64_t layers, int64_t chunks, std::vector<int64_t> counts) {
    try {
      pipeline_chunks(layers, chunks, 0, counts);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(problem(4, 2, {2, 3}) == "[2, 3]: the counts add up to 5, not the model's 4 layers");
  CHECK(problem(4, 2, {4}) == "[4]: one count of layers a pipeline chunk, 2 of them (parallel.pp x pp_virtual_stages)");
  CHECK(problem(4, 4, {2, 0, 2, 0}) == "[2, 0, 2, 0]: chunk 1 holds 0 layers: a chunk between the first (the "
                                       "embedding's) and the last (the head's) holds at least one");
  CHECK(problem(4, 2, {5, -1}) == "[5, -1]: chunk 1 holds -1 layers: a chunk between the first (the embedding's) "
                                  "and the last (the head's) holds at least one");
}

TEST_CASE("describe_pipeline_cut names each chunk's layers and rank", "[pipeline_layout]") {
  using namespace xtrain::config;
  CHECK(describe_pipeline_cut(pipeline_chunks(4, 2, 0, {3, 1}), pipeline_placement(PpSchedule::one_f_one_b, 2, 1)) ==
        "chunk 0 (rank 0): the embedding, layers 0-2; chunk 1 (rank 1): layer 3, the head");
  // The V: rank 0 holds the first and the last chunk.
  CHECK(describe_pipeline_cut(pipeline_chunks(4, 4, 0, {0, 2, 2, 0}), pipeline_placement(PpSchedule::zbv, 2, 2)) ==
        "chunk 0 (rank 0): the embedding; chunk 1 (rank 1): layers 0-1; chunk 2 (rank 1): layers 2-3; chunk 3 "
        "(rank 0): the head");
}
