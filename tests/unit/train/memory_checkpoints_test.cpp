// MemoryCheckpoints on 4 thread ranks as 2 nodes of 2: what each node's folder holds after keep(),
// and what assemble() makes of a lost node's folder and of a damaged copy.
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>

#include <torch/torch.h>

#include <catch2/catch.hpp>

#include "ckpt/checkpoint.h"
#include "ckpt/manifest.h"
#include "ckpt/sharded_checkpoint.h"
#include "parallel/rank_threads.h"
#include "parallel/thread_comm.h"
#include "scratch_dir.h"
#include "train/memory_checkpoints.h"

namespace fs = std::filesystem;
using xtrain::train::MemoryCheckpoints;

namespace {

constexpr int64_t kRanks = 4, kRanksPerNode = 2;

// A committed step-<step> of 4 shards, as a 4-rank run writes it.
std::string write_checkpoint(const fs::path& run, int64_t step) {
  const std::string folder = (run / fmt::format("step-{}", step)).string();
  fs::create_directories(folder);
  for (int64_t r = 0; r < kRanks; ++r) {
    auto values = torch::arange(4 * r, 4 * r + 4, torch::kFloat32) + static_cast<float>(step);
    xtrain::ckpt::ParameterPiece piece{"w", xtrain::ckpt::PieceLayout::range({16}, 4 * r, 4), values,
                                       torch::zeros({4}), torch::ones({4})};
    xtrain::ckpt::write_checkpoint_shard(folder, r, {piece}, step);
  }
  xtrain::ckpt::write_metadata_files(folder, {{"model_type", "llama"}}, {{"step", step}}, "name: test\n");
  xtrain::ckpt::write_manifest(folder);
  return folder;
}

std::set<std::string> files_in(const fs::path& folder) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(folder)) names.insert(entry.path().filename().string());
  return names;
}

std::string node_root(const fs::path& base, int64_t rank) {
  return (base / fmt::format("node{}", rank / kRanksPerNode)).string();
}

// keep(step) on every rank; `between` while no rank runs (the restart); assemble(step) on every
// rank, each over a fresh group (the restarted ranks').
struct Outcome {
  std::vector<std::optional<MemoryCheckpoints::Assembled>> assembled{kRanks};
};

template <typename Between>
Outcome keep_then_assemble(const fs::path& base, const std::string& folder, int64_t step, Between between) {
  auto comms = xtrain::parallel::make_thread_comms(kRanks, "world");
  auto errors = xtrain::testing::run_ranks(kRanks, [&](int64_t r) {
    MemoryCheckpoints memory(node_root(base, r), comms[r], kRanksPerNode, torch::kCPU);
    memory.keep(step, folder);
  });
  for (const auto& error : errors) REQUIRE(error.empty());
  between();
  Outcome outcome;
  comms = xtrain::parallel::make_thread_comms(kRanks, "world");
  errors = xtrain::testing::run_ranks(kRanks, [&](int64_t r) {
    MemoryCheckpoints memory(node_root(base, r), comms[r], kRanksPerNode, torch::kCPU);
    outcome.assembled[r] = memory.assemble(step);
  });
  for (const auto& error : errors) REQUIRE(error.empty());
  return outcome;
}

}  // namespace

TEST_CASE("each node keeps its ranks' files and the other node's, and drops older steps") {
  xtrain::testing::ScratchDir scratch;
  const auto run = scratch.path() / "run", memory = scratch.path() / "memory";
  const auto step_5 = write_checkpoint(run, 5), step_10 = write_checkpoint(run, 10);
  keep_then_assemble(memory, step_5, 5, [] {});
  const auto outcome = keep_then_assemble(memory, step_10, 10, [] {});
  // Two nodes: each holds its own ranks' files and the copies of the other's, so all of them.
  for (const char* node : {"node0", "node1"}) {
    INFO(node);
    CHECK(files_in(memory / node) == std::set<std::string>{"step-10"});
    CHECK(files_in(memory / node / "step-10") == files_in(step_10));
  }
  for (const auto& assembled : outcome.assembled) {
    REQUIRE(assembled);
    CHECK(assembled->files_fetched == 0);
  }
}

TEST_CASE("a lost node's folder is assembled from the other node's copies and verified") {
  xtrain::testing::ScratchDir scratch;
  const auto run = scratch.path() / "run", memory = scratch.path() / "memory";
  const auto folder = write_checkpoint(run, 10);
  const auto outcome = keep_then_assemble(memory, folder, 10, [&] { fs::remove_all(memory / "node1"); });
  const auto expected = files_in(folder);
  for (int64_t r = 0; r < kRanks; ++r) {
    INFO("rank " << r);
    REQUIRE(outcome.assembled[r]);
    CHECK(outcome.assembled[r]->dir == (memory / fmt::format("node{}", r / 2) / "step-10").string());
    CHECK(outcome.assembled[r]->files_fetched == static_cast<int64_t>(expected.size()));
  }
  CHECK(outcome.assembled[0]->verification.rfind("verified", 0) == 0);
  CHECK(files_in(memory / "node1" / "step-10") == expected);
  for (const auto& name : expected) {
    INFO(name);
    std::ifstream a(folder + "/" + name, std::ios::binary), b(memory / "node1" / "step-10" / name, std::ios::binary);
    CHECK(std::string(std::istreambuf_iterator<char>(a), {}) == std::string(std::istreambuf_iterator<char>(b), {}));
  }
}

TEST_CASE("a damaged copy makes every rank read the disk instead") {
  xtrain::testing::ScratchDir scratch;
  const auto run = scratch.path() / "run", memory = scratch.path() / "memory";
  const auto folder = write_checkpoint(run, 10);
  const auto outcome = keep_then_assemble(memory, folder, 10, [&] {
    fs::remove_all(memory / "node1");
    const auto shard = memory / "node0" / "step-10" / xtrain::ckpt::shard_file_name(3);
    std::fstream file(shard, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(-3, std::ios::end);
    file.put('\x7f');
  });
  for (const auto& assembled : outcome.assembled) CHECK_FALSE(assembled);
}

TEST_CASE("with no copy anywhere there is nothing to assemble") {
  xtrain::testing::ScratchDir scratch;
  const auto run = scratch.path() / "run", memory = scratch.path() / "memory";
  const auto folder = write_checkpoint(run, 10);
  const auto outcome = keep_then_assemble(memory, folder, 10, [&] { fs::remove_all(memory); });
  for (const auto& assembled : outcome.assembled) CHECK_FALSE(assembled);
}
