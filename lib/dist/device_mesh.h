// The parallel layout of a job: parallel.{dp, fsdp, tp, pp, ep} degrees over the world's ranks,
// and the named groups built once from them. Ranks are laid out dp-major, fsdp-minor
// (rank = dp_index * fsdp + fsdp_index), so a sharding group is a run of consecutive ranks (on
// one node when fsdp divides the node's ranks) and the replicas of a shard are fsdp ranks apart.
// Every rank is a data-parallel rank: data_size() = dp * fsdp.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "dist/comm.h"
#include "dist/process_groups.h"
#include "dist/world.h"

namespace xtrain::dist {

struct ParallelDegrees {
  int64_t dp = 1;
  int64_t fsdp = -1;
  int64_t tp = 1;
  int64_t pp = 1;
  int64_t ep = 1;
};

// Fills in the one degree given as -1 ("the rest"), then checks that the product equals the
// world size and that the layout is one this build implements. Problems are InputErrors that
// show the product.
ParallelDegrees resolve_degrees(ParallelDegrees requested, int64_t world_size);

struct DeviceMesh {
  World world;
  ParallelDegrees degrees;
  std::shared_ptr<ProcessGroups> groups;  // null for one process
  std::shared_ptr<Comm> world_comm;
  std::shared_ptr<Comm> fsdp;  // this rank's sharding group
  std::shared_ptr<Comm> dp;    // this rank's replica group (same fsdp index)

  int64_t data_rank() const { return world.rank; }
  int64_t data_size() const { return degrees.dp * degrees.fsdp; }
  std::string describe() const;
};

// Builds the groups over the backend (Gloo for CPU tensors, NCCL for CUDA ones); with one
// process, single-process comms and no store.
// init_timeout_s bounds the wait for every rank to join.
DeviceMesh build_mesh(const World& world, const ParallelDegrees& degrees, double timeout_s,
                      CommBackend backend = CommBackend::gloo, double init_timeout_s = 300);

}  // namespace xtrain::dist
