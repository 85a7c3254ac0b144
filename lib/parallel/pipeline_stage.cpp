#include "parallel/pipeline_stage.h"

#include <torch/torch.h>

#include "parallel/fully_sharded.h"

namespace xtrain::parallel {

// One chunk's units: its ends (the embedding and the head, when it has them), gathered for the
// whole chunk, and its blocks by layer, each gathered just around its own computation.
class ChunkUnits {
 public:
  std::vector<ShardUnit*> ends;
  int64_t first_layer = 0;
  std::vector<std::vector<ShardUnit*>> blocks;  // block first_layer + i

  bool has(int64_t layer) const {
    return layer >= first_layer && layer < first_layer + static_cast<int64_t>(blocks.size());
  }
  void for_ends(void (ShardUnit::*step)()) const {
    for (auto* unit : ends) (unit->*step)();
  }
  void for_block(int64_t layer, void (ShardUnit::*step)()) const {
    if (!has(layer)) return;
    for (auto* unit : blocks[static_cast<size_t>(layer - first_layer)]) (unit->*step)();
  }
  void reduce_block(int64_t layer) const {
    if (!has(layer)) return;
    for (auto* unit : blocks[static_cast<size_t>(layer - first_layer)]) unit->start_reduce(/*last_micro_batch=*/true);
  }
  int64_t last_layer() const { return first_layer + static_cast<int64_t>(blocks.size()) - 1; }
};

PipelineStage::PipelineStage(std::shared_ptr<model::CausalLM> model, model::ShardPlan plan, const DeviceMesh& mesh,
                             config::PipelinePlacement placement, bool reshard_after_forward,
                             const model::ParameterSource& source)
    : ParallelModel(std::move(model), &mesh),
      world_(mesh.group(Dim::world)),
      stages_(mesh.size(Dim::pp)),
      rank_(mesh.coordinate(Dim::pp)),
      placement_(placement),
      fully_sharded_(mesh.shard_group(Dim::fsdp)->size() > 1),  // fsdp x cp: cp ranks share a stage's shards
      reshard_after_forward_(reshard_after_forward) {
  TORCH_CHECK(placement_.stages == stages_, "a pipeline placement of ", placement_.stages, " stages on ", stages_);
  const int64_t depths = model_->config().mtp_layers;
  cut_ = placement_.cut(static_cast<int64_t>(plan.blocks.size()) - depths, depths);
  const auto& all = cut_;
  auto keep = [&](model::ShardPlan::Unit& unit) {
    units_.push_back(std::make_unique<ShardUnit>(unit.name, std::move(unit.parameters), mesh.shard_group(unit.shard_over),
                                                 mesh.group(unit.replicate_over), source, unit.placements,
                                                 plan.float8_gathered));
    return units_.back().get();
  };
  auto mark_copy = [this] {
    table_copy_ = true;
    for (auto& piece : table_->parameters()) piece.primary = false;
  };
  std::optional<model::ShardPlan::Unit> table;
  if (plan.head_read_by_every_stage) {
    // One unit for all of this rank's chunks; the first stage's is the one checkpoints hold.
    TORCH_CHECK(!plan.embedding, "a plan whose head every stage reads has no embedding unit");
    table_ = keep(plan.head);
    if (rank_ != 0) mark_copy();
    pipeline_ = mesh.group(Dim::pp);
  } else {
    table = shared_table(plan, mesh);
  }
  for (int64_t v = 0; v < placement_.virtual_stages; ++v) {
    const auto& chunk = all[static_cast<size_t>(placement_.global_chunk(rank_, v))];
    chunks_.push_back(chunk);
    auto units = std::make_unique<ChunkUnits>();
    units->first_layer = chunk.first_layer;
    const bool every_stage = plan.head_read_by_every_stage;
    if (every_stage) units->ends.push_back(table_);
    if (chunk.embedding && !every_stage) {
      auto* embedding = plan.embedding ? keep(*plan.embedding) : keep(*table);
      if (table) table_ = embedding;
      units->ends.push_back(embedding);
    }
    for (int64_t layer = chunk.first_layer; layer < chunk.last_layer; ++layer) {
      units->blocks.emplace_back();
      for (auto& unit : plan.blocks[static_cast<size_t>(layer)]) units->blocks.back().push_back(keep(unit));
    }
    if (chunk.head && !every_stage) {
      if (table && table_) {
        units->ends.push_back(table_);  // the V (zbv, dualpipev): this rank holds the lookup too, one table for both
      } else if (table) {
        // The last stage's copy of the table: the first stage's is the one checkpoints hold and
        // the gradient norm counts.
        table_ = keep(*table);
        mark_copy();
        units->ends.push_back(table_);
      }
      units->ends.push_back(keep(plan.head));
    }
    chunk_units_.push_back(std::move(units));
  }
  if (!fully_sharded_) return;
  // Wraps whatever runner the memory policy installed (recompute, offload): it runs inside.
  auto inner = model_->block_runner;
  model_->block_runner = [this, inner](int64_t layer, const torch::Tensor& x, const UnitFn& block) {
    if (!inner) return run_sharded_unit(block_hooks(layer), x, block);
    UnitFn wrapped = [&inner, layer, &block](const torch::Tensor& input) { return inner(layer, input, block); };
    return run_sharded_unit(block_hooks(layer), x, wrapped);
  };
}

// With tied embeddings the plan has no embedding unit and its head unit holds the table first:
// the table becomes a unit of its own, which the first stage keeps for the lookup and the last
// for the output projection. With prediction depths the last stage keeps a copy of the embedding
// unit for their lookups. Alike on both (the same shards over the same groups), their gradients
// are summed over the pipeline after each step and the two copies stay equal.
std::optional<model::ShardPlan::Unit> PipelineStage::shared_table(model::ShardPlan& plan, const DeviceMesh& mesh) {
  std::optional<model::ShardPlan::Unit> unit;
  if (plan.embedding && model_->config().mtp_layers > 0) unit = *plan.embedding;
  if (!plan.embedding) {
    TORCH_CHECK(!plan.head.parameters.empty(), "a tied plan's head unit holds the embedding table");
    auto table = plan.head.parameters.front();
    plan.head.parameters.erase(plan.head.parameters.begin());
    unit = model::ShardPlan::Unit{"tied_embedding", {table}, plan.head.shard_over, plan.head.replicate_over, {}};
    if (auto placed = plan.head.placements.find(table.first); placed != plan.head.placements.end())
      unit->placements.insert(*placed);
  }
  if (!unit) return unit;
  const int64_t shards = mesh.shard_group(unit->shard_over)->size();
  table_shard_numel_ = (unit->parameters.front().second.numel() + shards - 1) / shards;
  pipeline_ = mesh.group(Dim::pp);
  return unit;
}

PipelineStage::~PipelineStage() {
  if (fully_sharded_) model_->block_runner = nullptr;
}

torch::Tensor PipelineStage::run_chunk(int64_t virtual_index, const torch::Tensor& input, const UnitFn& chunk) {
  if (!fully_sharded_) return chunk(input);
  return run_sharded_unit(chunk_hooks(*chunk_units_[static_cast<size_t>(virtual_index)]), input, chunk);
}

// The ends stay gathered for the chunk's pass; the first block to run is prefetched with them.
UnitHooks PipelineStage::chunk_hooks(ChunkUnits& units) const {
  const bool keep = !reshard_after_forward_;
  return {[&units] {
            units.for_ends(&ShardUnit::start_gather);
            units.for_block(units.first_layer, &ShardUnit::start_gather);
            units.for_ends(&ShardUnit::wait_gather);
          },
          [&units, keep] {
            if (!keep || !torch::GradMode::is_enabled()) units.for_ends(&ShardUnit::reshard);
          },
          [&units] {
            units.for_ends(&ShardUnit::start_gather);
            units.for_block(units.last_layer(), &ShardUnit::start_gather);
            units.for_ends(&ShardUnit::wait_gather);
            units.for_ends(&ShardUnit::prepare_gradients);
          },
          [&units] {
            units.for_block(units.first_layer, &ShardUnit::finish_reduce);
            for (auto* unit : units.ends) unit->start_reduce(/*last_micro_batch=*/true);
            units.for_ends(&ShardUnit::finish_reduce);
            units.for_ends(&ShardUnit::reshard);
          }};
}

// Forward goes up the chunk's layers and backward down: each prefetches the block it meets next,
// and a block's gradients reduce while the one below computes.
UnitHooks PipelineStage::block_hooks(int64_t layer) const {
  const ChunkUnits* found = nullptr;
  for (const auto& units : chunk_units_)
    if (units->has(layer)) found = units.get();
  TORCH_CHECK(found, "pipeline stage ", rank_, " runs no chunk with layer ", layer);
  const ChunkUnits& units = *found;
  const bool keep = !reshard_after_forward_;
  return {[&units, layer] {
            units.for_block(layer, &ShardUnit::wait_gather);
            units.for_block(layer + 1, &ShardUnit::start_gather);
          },
          [&units, layer, keep] {
            if (!keep || !torch::GradMode::is_enabled()) units.for_block(layer, &ShardUnit::reshard);
          },
          [&units, layer] {
            units.for_block(layer, &ShardUnit::wait_gather);
            units.for_block(layer - 1, &ShardUnit::start_gather);
            units.for_block(layer, &ShardUnit::prepare_gradients);
          },
          [&units, layer] {
            units.for_block(layer + 1, &ShardUnit::finish_reduce);
            units.reduce_block(layer);
            units.for_block(layer, &ShardUnit::reshard);
          }};
}

std::vector<ParameterShard*> PipelineStage::parameters() {
  std::vector<ParameterShard*> all;
  for (auto& unit : units_)
    for (auto& p : unit->parameters()) all.push_back(&p);
  return all;
}

void PipelineStage::zero_grad() {
  for (auto& unit : units_) unit->zero_shard_grad();
}

void PipelineStage::finish_gradients() {
  // Sharded units reduced after each backward (finish_reduce then has nothing left to do).
  if (!fully_sharded_)
    for (auto& unit : units_) unit->start_reduce(/*last_micro_batch=*/true);
  for (auto& unit : units_) unit->finish_reduce();
  if (!pipeline_) return;
  // The shared table's gradient: the first stage's (from the lookup) plus the last's (from the
  // output projection or the depths' lookups); the stages between add zeros.
  auto gradient = table_ ? table_->shard_grad()
                         : torch::zeros({table_shard_numel_}, units_.front()->shard_grad().options());
  pipeline_->all_reduce_sum(gradient).wait();
}

double PipelineStage::clip_grad_norm(double max_norm) {
  std::vector<ShardUnit*> units, duplicates;
  for (auto& unit : units_) (table_copy_ && unit.get() == table_ ? duplicates : units).push_back(unit.get());
  return clip_units_grad_norm(units, *world_, max_norm, duplicates);
}

int64_t PipelineStage::resident_bytes() const {
  int64_t bytes = 0;
  for (const auto& unit : units_) bytes += unit->resident_bytes();
  return bytes;
}

int64_t PipelineStage::gathered_bytes() const {
  int64_t bytes = 0;
  for (const auto& unit : units_) bytes += unit->gathered_bytes();
  return bytes;
}

}  // namespace xtrain::parallel
