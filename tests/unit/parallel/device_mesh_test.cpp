// The named mesh: coordinates in the documented order (pp, dp, fsdp, tp: tp innermost), the
// ranks of every group and of flattened dimensions, the data-parallel rank from (dp, fsdp)
// alone, and the groups built once each, in the same order on every rank.
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "parallel/device_mesh.h"

using namespace xtrain;

namespace {

// A mesh of `rank` whose factory records each group asked for; the comms are single-process
// stand-ins, enough for names and layout.
struct RecordedMesh {
  std::vector<std::pair<std::string, std::vector<int64_t>>> made;
  std::unique_ptr<parallel::DeviceMesh> mesh;

  RecordedMesh(int64_t rank, parallel::ParallelDegrees degrees) {
    parallel::World world;
    world.rank = rank;
    world.size = degrees.pp * degrees.dp * degrees.fsdp * degrees.tp;
    mesh = std::make_unique<parallel::DeviceMesh>(world, degrees,
                                              [this](const std::string& name, const std::vector<int64_t>& ranks) {
                                                made.emplace_back(name, ranks);
                                                return parallel::make_single_process_comm(name);
                                              });
  }
  std::vector<int64_t> ranks_of(const std::string& name) const {
    for (const auto& [n, ranks] : made)
      if (n == name) return ranks;
    return {};
  }
};

parallel::ParallelDegrees degrees(int64_t pp, int64_t dp, int64_t fsdp, int64_t tp, int64_t ep = 1) {
  parallel::ParallelDegrees d;
  d.pp = pp;
  d.dp = dp;
  d.fsdp = fsdp;
  d.tp = tp;
  d.ep = ep;
  return d;
}

}  // namespace

TEST_CASE("mesh coordinates: pp outermost, tp innermost", "[parallel][mesh]") {
  // 16 ranks: pp 2 x dp 2 x fsdp 2 x tp 2. Rank 13 = ((1 * 2 + 1) * 2 + 0) * 2 + 1.
  RecordedMesh m(13, degrees(2, 2, 2, 2));
  std::vector<std::string> dimensions;
  for (const auto d : parallel::DeviceMesh::dimensions()) dimensions.emplace_back(to_string(d));
  CHECK(dimensions == std::vector<std::string>{"pp", "dp", "fsdp", "cp", "tp"});
  CHECK(m.mesh->coordinate(parallel::Dim::pp) == 1);
  CHECK(m.mesh->coordinate(parallel::Dim::dp) == 1);
  CHECK(m.mesh->coordinate(parallel::Dim::fsdp) == 0);
  CHECK(m.mesh->coordinate(parallel::Dim::tp) == 1);
  CHECK(m.mesh->data_rank() == 2);  // dp 1 x fsdp 2 + fsdp 0: not the world rank
  CHECK(m.mesh->data_size() == 4);
  CHECK(m.ranks_of("tp") == std::vector<int64_t>{12, 13});
  CHECK(m.ranks_of("fsdp") == std::vector<int64_t>{13, 15});
  CHECK(m.ranks_of("dp") == std::vector<int64_t>{9, 13});
  CHECK(m.ranks_of("pp") == std::vector<int64_t>{5, 13});
  CHECK(m.ranks_of("dp_fsdp") == std::vector<int64_t>{9, 11, 13, 15});
  CHECK(m.ranks_of("world").size() == 16);
  CHECK(m.mesh->flatten({parallel::Dim::fsdp, parallel::Dim::dp})->name() == "dp_fsdp");  // any order asked, mesh order kept
  CHECK(m.mesh->group(parallel::Dim::tp)->name() == "tp");
  // One group per set of dimensions, made once: world and the 15 non-empty sets.
  CHECK(m.made.size() == 16);
}

TEST_CASE("mesh groups: dimensions of size 1 make no group, and sets that differ only by them share one",
          "[parallel][mesh]") {
  RecordedMesh m(3, degrees(1, 2, 2, 1));  // HSDP 2x2
  CHECK(m.mesh->data_rank() == 3);
  CHECK(m.ranks_of("fsdp") == std::vector<int64_t>{2, 3});
  CHECK(m.ranks_of("dp") == std::vector<int64_t>{1, 3});
  CHECK(m.ranks_of("dp_fsdp") == std::vector<int64_t>{0, 1, 2, 3});
  CHECK(m.made.size() == 4);  // world, dp, fsdp, dp_fsdp
  CHECK(m.mesh->flatten({parallel::Dim::pp, parallel::Dim::fsdp, parallel::Dim::tp})->name() == "fsdp");
  CHECK(m.mesh->group(parallel::Dim::tp)->size() == 1);

  RecordedMesh one(0, degrees(1, 1, 1, 1));
  CHECK(one.made.empty());
  CHECK(one.mesh->group(parallel::Dim::world)->size() == 1);

  CHECK_THROWS_WITH(m.mesh->flatten({parallel::Dim::ep}), "no mesh dimension 'ep' (dimensions: pp, dp, fsdp, cp, tp)");
  CHECK_THROWS_WITH(m.mesh->flatten({parallel::Dim::dp, parallel::Dim::dp}), "flatten({dp, dp}): each dimension once, at least one");
}

TEST_CASE("expert parallelism folds into the data ranks: ep groups of consecutive data ranks, edp across them",
          "[parallel][mesh]") {
  // 32 ranks: pp 2 x dp 2 x fsdp 4 x tp 2, ep 4. Rank 27 = ((1 * 2 + 1) * 4 + 1) * 2 + 1: data rank 5
  // of 8 at (pp 1, tp 1), whose data rank 0 is world rank 17.
  RecordedMesh m(27, degrees(2, 2, 4, 2, 4));
  CHECK(m.mesh->data_rank() == 5);
  CHECK(m.mesh->size(parallel::Dim::ep) == 4);
  CHECK(m.mesh->size(parallel::Dim::edp) == 2);
  CHECK(m.mesh->coordinate(parallel::Dim::ep) == 1);
  CHECK(m.mesh->coordinate(parallel::Dim::edp) == 1);
  CHECK(m.ranks_of("ep") == std::vector<int64_t>{25, 27, 29, 31});  // data ranks 4..7
  CHECK(m.ranks_of("edp") == std::vector<int64_t>{19, 27});         // data ranks 1 and 5
  CHECK(m.mesh->group(parallel::Dim::ep)->name() == "ep");
  CHECK(m.made.size() == 16 + 2);

  // ep 1: no expert group; edp is the data-parallel group itself. ep = all data ranks: edp has one.
  RecordedMesh plain(3, degrees(1, 2, 2, 1));
  CHECK(plain.mesh->group(parallel::Dim::ep)->size() == 1);
  CHECK(plain.mesh->group(parallel::Dim::edp) == plain.mesh->flatten({parallel::Dim::dp, parallel::Dim::fsdp}));
  RecordedMesh all(3, degrees(1, 1, 4, 1, 4));
  CHECK(all.ranks_of("ep") == std::vector<int64_t>{0, 1, 2, 3});
  CHECK(all.mesh->group(parallel::Dim::edp)->size() == 1);
}
