// One shard unit of FSDP: a group of model parameters (a transformer block, the embedding, or
// the final norm and head) whose values live in one flat fp32 buffer split evenly over a sharding
// group, this rank keeping 1/N of it (the shard). The module parameters themselves hold no
// memory until gathered: gather() all-gathers the shards into a full flat buffer and points each
// parameter at its piece of it; reshard() frees that buffer again.
//
// Gradients: before a backward pass over the unit, prepare_gradients() points every parameter's
// .grad at a zeroed full flat gradient buffer, into which autograd accumulates; reduce() then
// reduce-scatters it over the sharding group (sums) and all-reduces the result over the replica
// group (HSDP, or DDP when the sharding group has one rank), adding it to the shard's gradient.
// With one rank per sharding group nothing is ever freed: the parameters stay views of the
// shard, and gradients of several micro batches accumulate in place until the last one reduces.
//
// Every buffer lives on the parameters' device. On CUDA the NCCL backend runs each collective on
// its own stream, ordered after the compute stream by an event and waited for by the compute
// stream (not the host) in wait(), so a gather prefetched for the next block overlaps this one.
//
// With `float8_gathered` naming some of its weights (precision.fp8_all_gather), a sharded unit
// gathers those as fp8 bytes and their scales (parallel/float8_gather.h).
//
// The groups are the unit's own: dense units shard over the FSDP group, while a unit of expert
// weights can shard over a different one.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "model/layers/parameter_source.h"
#include "model/shard_plan.h"
#include "parallel/comm.h"
#include "parallel/float8_gather.h"

namespace xtrain::parallel {

// This rank's piece of one parameter: elements [begin, begin + local.numel()) of the flattened
// part that the module holds (the whole tensor, or the box [offsets, offsets + sizes) of it
// under tensor or expert parallelism), as a view of the unit's shard (and of its gradient).
struct ParameterShard {
  std::string name;
  std::vector<int64_t> shape;    // of the whole tensor
  std::vector<int64_t> offsets;  // of the part
  std::vector<int64_t> sizes;    // of the part
  int64_t begin = 0;
  int64_t copies = 1;   // ranks outside the unit's groups holding the same part (model::Placement)
  torch::Tensor local;  // 1-D view of the shard; .grad() a view of the shard's gradient
  // False for a copy that another rank writes to checkpoints and counts in the gradient norm (a
  // tied embedding table on the last pipeline stage, parallel/pipeline_stage.h).
  bool primary = true;
  // True on every rank of the unit's replica group but its first, which holds the same piece and
  // writes it to checkpoints (data-parallel replicas; an expert's piece, whose replica group is
  // the rank itself, is written by every rank that holds one).
  bool replica = false;
};

class ShardUnit {
 public:
  // params are the module's own tensors. The unit fills this rank's shard from `source`, asking
  // for the slices of each parameter that fall in it; without a source, from the parameters'
  // current (full) values, identical on every rank of the sharding group. It then releases the
  // parameters' memory. A parameter with a placement is a part of a whole tensor: the source is
  // asked for, and the shard describes, the whole's elements.
  ShardUnit(std::string name, std::vector<std::pair<std::string, torch::Tensor>> params,
            std::shared_ptr<Comm> shard_group, std::shared_ptr<Comm> replica_group,
            const model::ParameterSource& source = {}, const std::map<std::string, model::Placement>& placements = {},
            const std::map<std::string, model::ScaleBlock>& float8_gathered = {});
  ~ShardUnit();

  const std::string& name() const { return name_; }
  bool sharded() const { return shard_group_->size() > 1; }
  int64_t replicas() const { return replica_group_->size(); }

  // Starts the all-gather of the full parameters (no-op when gathered or in flight).
  void start_gather();
  // Completes it: afterwards every module parameter holds its full value.
  void wait_gather();
  // Frees the full parameters (sharded units only).
  void reshard();

  // Points the parameters' .grad at a zeroed full gradient buffer (kept across micro batches
  // when unsharded).
  void prepare_gradients();
  // The same for a backward pass that reads no parameter value (an embedding lookup's): the
  // parameters, if not gathered, become zero-stride stand-ins of their shape, which autograd
  // accepts when it accumulates into their full-size gradients; reshard() drops them.
  void prepare_gradients_ungathered();
  // Starts reducing the accumulated full gradients; `last_micro_batch` false on an unsharded unit
  // defers the reduction, keeping the local sum.
  void start_reduce(bool last_micro_batch);
  // Completes the reduction into the shard's gradient and frees the full gradient buffer.
  void finish_reduce();

  // Off: the replica all-reduce is skipped and the shard's gradient holds this replica's own
  // estimate of the global one (its sum times replicas()), for an optimizer that exchanges
  // something else over the replicas instead (1-bit Adam's compressed momentum).
  void set_replica_reduction(bool on) { replica_reduction_ = on; }

  void zero_shard_grad();
  torch::Tensor shard() const { return shard_; }
  torch::Tensor shard_grad() const { return shard_grad_; }
  std::vector<ParameterShard>& parameters() { return shards_; }

  int64_t numel() const { return numel_; }
  int64_t shard_numel() const { return shard_.numel(); }
  // Bytes this unit holds now: shard, its gradient, gathered parameters and full gradients.
  int64_t resident_bytes() const;
  // Bytes its gathers so far have brought from the other ranks of the sharding group.
  int64_t gathered_bytes() const { return gathered_bytes_; }

 private:
  struct Member {
    std::string name;
    torch::Tensor param;  // the module's parameter
    std::vector<int64_t> shape;
    int64_t offset;  // in the flat buffer
    int64_t numel;
  };
  void point_parameters_at(const torch::Tensor& flat);
  // XTRAIN_NUMERIC_FAULT grad_scale, on this rank's gradients before they are reduced.
  void inject_gradient_fault(const torch::Tensor& flat_grad) const;

  std::string name_;
  std::vector<Member> members_;
  std::vector<ParameterShard> shards_;
  std::shared_ptr<Comm> shard_group_, replica_group_;
  int64_t numel_ = 0;    // unpadded
  int64_t padded_ = 0;   // a multiple of the sharding group's size
  torch::TensorOptions options_;  // fp32 on the parameters' device
  torch::Tensor shard_, shard_grad_;
  torch::Tensor full_;       // the gathered buffer; its memory only while gathered (release_memory)
  torch::Tensor full_grad_;  // defined while gradients accumulate
  PendingCollective gather_, reduce_;
  std::unique_ptr<Float8Gather> float8_;  // when some weights gather in FP8
  int64_t gathered_bytes_ = 0;
  torch::Tensor reduce_out_;
  bool gathered_ = false, gathering_ = false, reducing_ = false;
  bool replica_reduction_ = true;
};

}  // namespace xtrain::parallel
