// Data parallelism for a CausalLM of any family: FSDP (ZeRO-3), HSDP, or DDP, by the device mesh's
// degrees. Each transformer block is a shard unit, and so are the token embedding and the head
// (final norm and output projection). During forward a block's parameters are gathered just
// before it runs while the next block's gather is already in flight (prefetch), and freed after
// it (reshard_after_forward); backward gathers them again, one block ahead, and starts the
// reduction of a block's gradients as soon as its backward is done, overlapping the rest. The
// embedding is gathered for its lookup only (its backward needs the ids, not the table) and
// takes a full gradient buffer at the very end of backward; the head is gathered after the last
// block and released, its gradients reducing, once backward has left it. Vocabulary-sized
// tensors are thus never held in full during the blocks. With tied embeddings the one table
// serves both ends, and the unit holding it, the final norm and the head stays gathered for the
// whole micro batch; its gradient exists once, in the unit's buffer, which the fused loss sums
// into during forward (memory::WeightGrad) and the lookup adds its rows to in place
// (model::Embedding), and the table goes as soon as backward is done with it.
// With fsdp = 1 nothing is gathered and each block's gradients are all-reduced over the replicas
// as soon as they are final: DDP with one bucket per block.
//
// Per micro batch: begin_micro_batch(last) before forward, end_micro_batch() after backward.
// The optimizer works on parameters(): this rank's pieces of every parameter, whose gradients
// hold the sum over the data-parallel ranks after the last micro batch. A mean is the caller's
// to weigh: the trainer weighs each micro batch's loss by its share of the global batch.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "parallel/device_mesh.h"
#include "parallel/parallel_model.h"
#include "parallel/shard_unit.h"
#include "model/causal_lm.h"

namespace xtrain::parallel {

class BlockUnits;  // a block's units, gathered and reduced together

class FullyShardedModel final : public ParallelModel {
 public:
  // With a source, the model's parameters may be unmaterialised: each unit fills its shard from
  // it, and no rank ever holds a whole parameter it does not keep. The plan is the model's own
  // unless given (expert parallelism splits each MoE block's units, parallel/expert_parallel.h).
  FullyShardedModel(std::shared_ptr<model::CausalLM> model, DeviceMesh mesh, bool reshard_after_forward,
                    const model::ParameterSource& source = {}, std::optional<model::ShardPlan> plan = std::nullopt);
  ~FullyShardedModel() override;

  std::vector<ParameterShard*> parameters() override;
  std::string weights_per_rank() const override { return "its shards"; }
  int64_t checkpoint_shards() const override { return mesh_.shard_group(Dim::fsdp)->size(); }
  const DeviceMesh& mesh() const { return mesh_; }

  // The head's gradient buffers are fresh when sharded.
  bool fresh_head_gradients() const override { return head_->sharded(); }

  // Every unit's replica all-reduce on or off (ShardUnit::set_replica_reduction).
  bool switches_replica_reduction() const override { return true; }
  void set_replica_reduction(bool on) override;

  void zero_grad() override;
  double clip_grad_norm(double max_norm) override;

  // Forward passes outside training (evaluation): keeps the head gathered until end_inference().
  void begin_inference() override;
  void end_inference() override;

  int64_t resident_bytes() const override;
  int64_t peak_resident_bytes() const override { return peak_bytes_; }
  int64_t gathered_bytes() const override;

  // Hooks for the block runner.
  void before_block_forward(int64_t layer);
  void after_block_forward(int64_t layer);
  void before_block_backward(int64_t layer);
  void after_block_backward(int64_t layer);

 private:
  void begin_units(bool last) override;
  void end_units() override;
  void note_peak();
  // XTRAIN_NUMERIC_FAULT skip_reduce_scatter names one of units().
  void check_numeric_fault_unit() const;
  // Embedding (when untied), blocks, head: every unit, in model order.
  std::vector<ShardUnit*> units() const;
  // No embedding unit (tied embeddings, or a root unit used between blocks), no blocks to hang
  // the head's gather and release on, or a final norm read before the last blocks (multi-token
  // prediction's depths follow it).
  bool head_gathered_for_whole_pass() const;

  DeviceMesh mesh_;
  bool reshard_after_forward_;
  bool tied_;  // the plan has no embedding unit
  std::unique_ptr<ShardUnit> embed_;  // null with tied embeddings (the head unit holds the table)
  std::vector<std::unique_ptr<BlockUnits>> blocks_;
  std::unique_ptr<ShardUnit> head_;
  bool last_micro_batch_ = true;
  int64_t peak_bytes_ = 0;
};

// The gradient norm over every rank's units (each piece counted once, see model::Placement), and
// the gradients scaled down to max_norm when above it (max_norm 0: never). `duplicates` are
// scaled too but not counted: copies of units that another rank counts.
double clip_units_grad_norm(const std::vector<ShardUnit*>& units, Comm& world, double max_norm,
                            const std::vector<ShardUnit*>& duplicates = {});

}  // namespace xtrain::parallel
