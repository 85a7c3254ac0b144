// The parallel layout of a job: parallel.{dp, fsdp, cp, tp, pp, ep} degrees over the world's ranks,
// as a mesh of named dimensions, and the groups along them, built once (DeviceMesh below).
#pragma once
#include <cstdint>
#include <memory>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "layout/mesh_dim.h"
#include "parallel/comm.h"
#include "parallel/process_groups.h"
#include "parallel/world.h"

namespace xtrain::parallel {

struct ParallelDegrees {
  int64_t dp = 1;
  int64_t fsdp = -1;
  int64_t tp = 1;
  int64_t pp = 1;
  int64_t ep = 1;
  int64_t cp = 1;
};

// Fills in the one degree given as -1 ("the rest"), then checks that the product equals the
// world size and that the layout is one this build implements. Problems are InputErrors that
// show the product.
ParallelDegrees resolve_degrees(ParallelDegrees requested, int64_t world_size);

// Makes the group of the given global ranks (which include this process's), called with the
// same name and ranks on every member: ProcessGroups::make_group, or in-process thread groups.
using GroupFactory =
    std::function<std::shared_ptr<Comm>(const std::string& name, const std::vector<int64_t>& ranks)>;

// Dimensions (layout/mesh_dim.h), outermost first: pp, dp, fsdp, cp, tp. A rank's coordinates
// follow from rank = (((pp_i * dp + dp_i) * fsdp + fsdp_i) * cp + cp_i) * tp + tp_i: tp's ranks
// are consecutive, cp's next, and a sharding group's nearly so (on one node when the degrees
// divide the node's ranks), pipeline stages furthest apart.
//
// Context-parallel ranks (cp) hold different tokens of the same samples: the data loader sees
// dp x fsdp data ranks, while FSDP shards over fsdp x cp (torchtitan's dp_shard_cp), whose
// gradients, each from its own tokens, sum like any data ranks'.
//
// Expert parallelism folds into the token ranks, dp x fsdp x cp (Megatron's "MoE parallel
// folding", XTuner's (fsdp, ep) mesh) rather than multiplying the world: those of one (pp, tp)
// place, in order, form groups of `ep` consecutive ones, "ep", among which a layer's experts
// are split (consecutive, so on one node when ep divides its ranks); "edp" are the token ranks
// at the same place of every ep group, over which each expert's weights are sharded. ep must
// divide dp x fsdp x cp.
class DeviceMesh {
 public:
  // The grid's dimensions, outermost first.
  static const std::vector<Dim>& dimensions();

  // Builds every group this rank belongs to, once: "world", one per dimension and one per set
  // of dimensions flattened together. A group of one rank is a single-process comm; the others
  // come from make_group, in the same order on every rank. `groups` is kept alive with the mesh
  // (null for one process).
  DeviceMesh(World world, ParallelDegrees degrees, const GroupFactory& make_group,
             std::shared_ptr<ProcessGroups> groups = nullptr);

  const World& world() const { return world_; }
  const ParallelDegrees& degrees() const { return degrees_; }
  // Any dimension: ep and edp too, world (the job) and self (this rank: size 1, coordinate 0).
  int64_t size(Dim dimension) const;
  int64_t coordinate(Dim dimension) const;  // this rank's index along it

  // The group along a dimension, of every rank (world) or of this rank alone (self).
  const std::shared_ptr<Comm>& group(Dim dimension) const;
  // The ranks that differ from this one only along `dimensions` (grid dimensions, each once, in
  // any order), e.g. flatten({Dim::dp, Dim::fsdp}): every data-parallel rank of this pipeline
  // stage and TP index. Others are a programming error (std::invalid_argument).
  const std::shared_ptr<Comm>& flatten(const std::vector<Dim>& dimensions) const;

  // The data-parallel position: over dp and fsdp only (cp ranks share their samples).
  int64_t data_rank() const { return coordinate(Dim::dp) * size(Dim::fsdp) + coordinate(Dim::fsdp); }
  int64_t data_size() const { return size(Dim::dp) * size(Dim::fsdp); }
  // The position among the ranks that hold different tokens of a (pp, tp) place: dp, fsdp, cp.
  int64_t token_rank() const { return data_rank() * size(Dim::cp) + coordinate(Dim::cp); }
  int64_t token_size() const { return data_size() * size(Dim::cp); }
  // The group a shard plan's unit shards over: fsdp's takes the cp ranks in too.
  const std::shared_ptr<Comm>& shard_group(Dim dimension) const;

  // Every group of this rank once (the names of a flattened set may share one), in a fixed order.
  std::vector<std::shared_ptr<Comm>> distinct_groups() const;

  ProcessGroups* process_groups() const { return process_groups_.get(); }
  std::string describe() const;

 private:
  int64_t stride(Dim dimension) const;
  std::vector<int64_t> ranks_along(const std::vector<Dim>& dimensions) const;
  void build_expert_groups(const GroupFactory& make_group, std::map<std::string, std::shared_ptr<Comm>>& by_ranks_name);

  World world_;
  ParallelDegrees degrees_;
  std::shared_ptr<ProcessGroups> process_groups_;
  // By the groups' names, the dimensions' joined in mesh order: "world", "dp", "dp_fsdp", ...
  std::map<std::string, std::shared_ptr<Comm>> groups_;
};

// Builds the groups over the backend (Gloo for CPU tensors, NCCL for CUDA ones); with one
// process, single-process comms and no store.
// init_timeout_s bounds the wait for every rank to join.
DeviceMesh build_mesh(const World& world, const ParallelDegrees& degrees, double timeout_s,
                      CommBackend backend = CommBackend::gloo, double init_timeout_s = 300);

}  // namespace xtrain::parallel
