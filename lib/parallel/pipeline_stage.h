// Pipeline parallelism's model side (parallel.pp > 1): the model is cut into pp x v contiguous
// chunks, the token embedding and the head (final norm and output projection) counting as one
// layer each for balance, and pipeline rank r runs chunks r, r + pp, ..., r + (v - 1) pp (one
// chunk per rank unless interleaved). A rank materialises and keeps only its chunks' parameters:
// each embedding, block and head unit of the shard plan that a chunk runs becomes a ShardUnit,
// replicated over "dp" (DDP within a stage: gradients accumulate over the micro batches and are
// all-reduced once per step), and sharded over fsdp x cp when either is above 1 (the cp ranks of
// a stage hold different tokens of the same rows, so they share its parameters). Placements (tensor-parallel slices) carry over, so checkpoints
// hold every stage's pieces by their global names and resume on any layout. The token table is
// read at both ends when the embeddings are tied (the head projects with it) or multi-token
// prediction's depths run beside the head (they look up the tokens ahead): the last stage then
// holds a copy, kept equal to the first stage's by summing their gradients over the pipeline.
// A model whose every chunk reads its head unit (ShardPlan::head_read_by_every_stage: BERT's
// embeddings beside their tied head, T5's shared table, position tables and norms) has that unit
// on every stage, kept equal the same way.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "config/pipeline_layout.h"
#include "model/causal_lm.h"
#include "model/layers/parameter_source.h"
#include "model/shard_plan.h"
#include "parallel/device_mesh.h"
#include "parallel/parallel_model.h"
#include "parallel/shard_unit.h"
#include "parallel/sharded_unit_node.h"

namespace xtrain::parallel {

using config::PipelineChunk;  // which layers a chunk holds: config/pipeline_layout.h
using config::pipeline_chunks;

class ChunkUnits;  // one chunk's units

class PipelineStage final : public ParallelModel {
 public:
  PipelineStage(std::shared_ptr<model::CausalLM> model, model::ShardPlan plan, const DeviceMesh& mesh,
                config::PipelinePlacement placement, bool reshard_after_forward, const model::ParameterSource& source);
  ~PipelineStage() override;

  // This rank's chunks, by virtual index, and where every chunk runs.
  const std::vector<PipelineChunk>& chunks() const { return chunks_; }
  const config::PipelinePlacement& placement() const { return placement_; }
  // Every chunk's layers and rank, for the log (config::describe_pipeline_cut).
  std::string describe_cut() const { return config::describe_pipeline_cut(cut_, placement_); }

  // Runs chunk `virtual_index`'s computation (its layers, and the loss on the last chunk) on
  // the activation `input` (undefined for the first chunk), its parameters present throughout.
  torch::Tensor run_chunk(int64_t virtual_index, const torch::Tensor& input, const UnitFn& chunk);

  std::vector<ParameterShard*> parameters() override;
  std::string weights_per_rank() const override { return "its stage's"; }
  PipelineStage* pipeline_stage() override { return this; }
  void zero_grad() override;
  void finish_gradients() override;  // completes every reduction
  double clip_grad_norm(double max_norm) override;
  int64_t resident_bytes() const override;
  int64_t gathered_bytes() const override;

 private:
  std::optional<model::ShardPlan::Unit> shared_table(model::ShardPlan& plan, const DeviceMesh& mesh);
  UnitHooks chunk_hooks(ChunkUnits& units) const;
  UnitHooks block_hooks(int64_t layer) const;

  std::shared_ptr<Comm> world_;
  int64_t stages_, rank_;
  config::PipelinePlacement placement_;
  bool fully_sharded_, reshard_after_forward_;
  std::vector<PipelineChunk> cut_, chunks_;  // every chunk; this rank's
  std::vector<std::unique_ptr<ShardUnit>> units_;
  std::vector<std::unique_ptr<ChunkUnits>> chunk_units_;  // by virtual index
  // A table read at both ends (tied embeddings, prediction depths), or the head unit every stage
  // reads: the pipeline group, this rank's copy (null on the stages between), whether it is a
  // copy (not the first stage's), and its shard's size.
  std::shared_ptr<Comm> pipeline_;
  ShardUnit* table_ = nullptr;
  bool table_copy_ = false;
  int64_t table_shard_numel_ = 0;
};

}  // namespace xtrain::parallel
