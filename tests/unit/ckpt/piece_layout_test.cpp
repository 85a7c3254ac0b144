// Checkpoint pieces in N dimensions: a piece of one layout (column or row shards, FSDP ranges of
// them, plain FSDP ranges of the whole tensor) fills a piece of any other, through files too;
// checkpoints whose pieces have no box (written before boxes) still load.
#include <filesystem>
#include <fstream>

#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "ckpt/checkpoint_reader.h"
#include "ckpt/piece_layout.h"
#include "ckpt/safetensors.h"
#include "ckpt/sharded_checkpoint.h"
#include "scratch_dir.h"
#include "util/input_error.h"

using namespace xtrain;

namespace {

// The values a piece holds of `whole`: its box, flattened, then its range.
torch::Tensor values_of(const torch::Tensor& whole, const ckpt::PieceLayout& piece) {
  auto box = whole;
  for (size_t d = 0; d < piece.shape.size(); ++d)
    box = box.narrow(static_cast<int64_t>(d), piece.offsets[d], piece.sizes[d]);
  return box.reshape(-1).narrow(0, piece.begin, piece.count).clone();
}

// A layout's pieces: the tensor split into `parts` boxes along `dim` (no split: dim -1), each box's
// flattening then split into `ranges` near-equal ranges, as FSDP over a tensor-parallel shard.
std::vector<ckpt::PieceLayout> layout(const std::vector<int64_t>& shape, int64_t dim, int64_t parts, int64_t ranges) {
  std::vector<ckpt::PieceLayout> pieces;
  for (int64_t p = 0; p < parts; ++p) {
    auto box = ckpt::PieceLayout::whole(shape);
    if (dim >= 0) {
      box.sizes[dim] = shape[dim] / parts;
      box.offsets[dim] = p * box.sizes[dim];
    }
    const int64_t numel = box.box_numel(), per = (numel + ranges - 1) / ranges;
    for (int64_t r = 0; r < ranges; ++r) {
      auto piece = box;
      piece.begin = std::min(numel, r * per);
      piece.count = std::min(numel, (r + 1) * per) - piece.begin;
      REQUIRE(piece.problem().empty());
      pieces.push_back(piece);
    }
  }
  return pieces;
}

}  // namespace

TEST_CASE("a piece of any layout fills a piece of any other", "[ckpt][pieces]") {
  const std::vector<int64_t> shape{6, 4, 10};
  const auto whole = torch::arange(240, torch::kFloat32).reshape({6, 4, 10});
  const std::vector<std::vector<ckpt::PieceLayout>> layouts = {
      layout(shape, -1, 1, 1),  // one process
      layout(shape, -1, 1, 7),  // FSDP 7 (uneven ranges)
      layout(shape, 0, 2, 3),   // column shards (dim 0), FSDP 3 over each
      layout(shape, 2, 2, 2),   // row shards (last dim), FSDP 2 over each
      layout(shape, 1, 4, 1),   // a middle dimension in 4
  };
  for (size_t a = 0; a < layouts.size(); ++a)
    for (size_t b = 0; b < layouts.size(); ++b) {
      INFO("from layout " << a << " to layout " << b);
      for (const auto& want : layouts[b]) {
        auto out = torch::full({want.count}, -1.0f);
        int64_t covered = 0;
        for (const auto& have : layouts[a]) {
          auto probe = torch::zeros({want.count});
          const bool overlap = ckpt::copy_overlap(have, values_of(whole, have), want, probe) > 0;
          CHECK(ckpt::pieces_overlap(have, want) == overlap);
          covered += ckpt::copy_overlap(have, values_of(whole, have), want, out);
        }
        CHECK(covered == want.count);
        CHECK(torch::equal(out, values_of(whole, want)));
      }
    }
  // A whole-tensor range is one run; a row shard is a run per row.
  CHECK(ckpt::piece_runs(ckpt::PieceLayout::range(shape, 5, 100)).size() == 1);
  CHECK(ckpt::piece_runs(layout(shape, 2, 2, 1)[1]).size() == 24);
  CHECK(ckpt::piece_runs(layout(shape, 0, 2, 1)[1]).size() == 1);
}

TEST_CASE("a sharded checkpoint of N-D pieces resumes as any layout; pieces without a box still load",
          "[ckpt][pieces]") {
  testing::ScratchDir scratch;
  const std::string dir = scratch.path().string();
  const std::vector<int64_t> shape{6, 4, 10};
  const auto weight = torch::randn({6, 4, 10});
  const auto norm = torch::randn({10});
  // Two ranks of row shards (last dim), each holding its whole box.
  for (int64_t rank = 0; rank < 2; ++rank) {
    const auto piece = layout(shape, 2, 2, 1)[rank];
    const auto norm_piece = ckpt::PieceLayout::range({10}, rank * 5, 5);
    ckpt::write_checkpoint_shard(dir, rank,
                                 {{"w", piece, values_of(weight, piece), values_of(weight * 2, piece),
                                   values_of(weight * 3, piece)},
                                  {"n", norm_piece, values_of(norm, norm_piece), values_of(norm, norm_piece),
                                   values_of(norm, norm_piece)}},
                                 7);
  }
  ckpt::write_metadata_files(dir, nlohmann::json::object(), nlohmann::json::object(), "name: x\n");
  ckpt::CheckpointReader reader(dir);
  CHECK(reader.optimizer_step() == 7);
  CHECK(torch::equal(reader.read_full("model", "w"), weight));
  CHECK(torch::equal(reader.read_full("exp_avg_sq", "w"), weight * 3));
  const auto column = layout(shape, 0, 3, 2)[3];  // a column shard's second FSDP range
  CHECK(torch::equal(reader.read("exp_avg", "w", column), values_of(weight * 2, column)));
  CHECK(torch::equal(reader.read("model", "w", 13, 50), weight.reshape(-1).narrow(0, 13, 50)));

  // The format before boxes: "shape" and "begin" only, the box the whole tensor.
  std::filesystem::remove(dir + "/" + ckpt::shard_file_name(1));
  const auto flat = weight.reshape(-1);
  ckpt::save_safetensors(dir + "/" + ckpt::shard_file_name(1),
                         {{"model/w", flat.narrow(0, 120, 120).clone()},
                          {"exp_avg/w", flat.narrow(0, 120, 120).clone()},
                          {"exp_avg_sq/w", flat.narrow(0, 120, 120).clone()}},
                         {{"format", "xtrain-shard"}, {"optimizer_step", "7"}, {"w", R"({"shape": [6, 4, 10], "begin": 120})"}});
  std::filesystem::remove(dir + "/" + ckpt::shard_file_name(0));
  ckpt::save_safetensors(dir + "/" + ckpt::shard_file_name(0),
                         {{"model/w", flat.narrow(0, 0, 120).clone()},
                          {"exp_avg/w", flat.narrow(0, 0, 120).clone()},
                          {"exp_avg_sq/w", flat.narrow(0, 0, 120).clone()}},
                         {{"format", "xtrain-shard"}, {"optimizer_step", "7"}, {"w", R"({"shape": [6, 4, 10], "begin": 0})"}});
  CHECK(torch::equal(ckpt::CheckpointReader(dir).read("model", "w", column), values_of(weight, column)));

  // A missing piece is an input error, not garbage.
  std::filesystem::remove(dir + "/" + ckpt::shard_file_name(1));
  CHECK_THROWS_WITH(ckpt::CheckpointReader(dir).read_full("model", "w"),
                    dir + ": the pieces of model 'w' cover 120 of the 240 elements [0, 240) needed; a shard file is "
                          "missing");
  // A box that leaves its tensor is named with the file.
  ckpt::save_safetensors(dir + "/" + ckpt::shard_file_name(1), {{"model/w", torch::zeros({4})},
                          {"exp_avg/w", torch::zeros({4})}, {"exp_avg_sq/w", torch::zeros({4})}},
                         {{"w", R"({"shape": [6, 4, 10], "offsets": [5, 0, 0], "sizes": [2, 1, 2], "begin": 0})"}});
  CHECK_THROWS_WITH(ckpt::CheckpointReader(dir),
                    dir + "/" + ckpt::shard_file_name(1) +
                        ": the piece of 'w': the box [5, 0, 0] + [2, 1, 2] leaves the shape [6, 4, 10]");
}

TEST_CASE("a reader reads a shard's values only when a read overlaps its pieces", "[ckpt][pieces]") {
  testing::ScratchDir scratch;
  const std::string dir = scratch.path().string();
  const std::vector<int64_t> shape{8, 6};
  const auto weight = torch::randn({8, 6});
  for (int64_t rank = 0; rank < 2; ++rank) {
    const auto piece = ckpt::PieceLayout::range(shape, rank * 24, 24);  // FSDP 2
    ckpt::write_checkpoint_shard(dir, rank, {{"w", piece, values_of(weight, piece), values_of(weight, piece),
                                              values_of(weight, piece)}}, 3);
  }
  ckpt::write_metadata_files(dir, nlohmann::json::object(), nlohmann::json::object(), "name: x\n");
  ckpt::CheckpointReader reader(dir);
  // Shard 1's values overwritten after the reader opened it: rank 0's reads never see them.
  const auto shard_1 = dir + "/" + ckpt::shard_file_name(1);
  const auto size = std::filesystem::file_size(shard_1);
  {
    std::fstream file(shard_1, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(static_cast<std::streamoff>(size - 3 * 24 * sizeof(float)));
    const std::string garbage(3 * 24 * sizeof(float), '\x7f');
    file.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  }
  const auto rank_0 = ckpt::PieceLayout::range(shape, 0, 24);
  for (const char* kind : {"model", "exp_avg", "exp_avg_sq"})
    CHECK(torch::equal(reader.read(kind, "w", rank_0), values_of(weight, rank_0)));
  // A read that overlaps shard 1 reads it then, and gets what the file holds now.
  CHECK_FALSE(torch::equal(reader.read_full("model", "w"), weight));
}
