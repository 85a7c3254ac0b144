#include "parallel/pipeline_stage.h"

#include <torch/torch.h>

#include "parallel/fully_sharded.h"

namespace xtrain::parallel {

std::vector<PipelineChunk> pipeline_chunks(int64_t layers, int64_t chunks) {
  TORCH_CHECK(chunks >= 1 && layers + 2 >= chunks, layers, " layers and the embedding and head do not fill ", chunks,
              " pipeline chunks");
  const int64_t slots = layers + 2;
  std::vector<PipelineChunk> all;
  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t begin = k * slots / chunks, end = (k + 1) * slots / chunks;
    // Slot 0 is the embedding, slot j in 1..L layer j - 1, slot L + 1 the head.
    all.push_back({std::max<int64_t>(begin, 1) - 1, std::min(end, layers + 1) - 1, begin == 0, end == slots});
  }
  return all;
}

PipelineStage::PipelineStage(model::ShardPlan plan, const DeviceMesh& mesh, int64_t virtual_stages,
                             const model::ParameterSource& source)
    : world_(mesh.group("world")), stages_(mesh.size("pp")), rank_(mesh.coordinate("pp")) {
  const auto all = pipeline_chunks(static_cast<int64_t>(plan.blocks.size()), stages_ * virtual_stages);
  auto keep = [&](model::ShardPlan::Unit& unit) {
    units_.push_back(std::make_unique<ShardUnit>(unit.name, std::move(unit.parameters), mesh.group("self"),
                                                 mesh.group("dp"), source, unit.placements));
  };
  for (int64_t v = 0; v < virtual_stages; ++v) {
    const auto& chunk = all[static_cast<size_t>(v * stages_ + rank_)];
    chunks_.push_back(chunk);
    TORCH_CHECK(!chunk.embedding || plan.embedding, "pipeline stages with tied embeddings");
    if (chunk.embedding) keep(*plan.embedding);
    for (int64_t layer = chunk.first_layer; layer < chunk.last_layer; ++layer)
      for (auto& unit : plan.blocks[static_cast<size_t>(layer)]) keep(unit);
    if (chunk.head) keep(plan.head);
  }
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

void PipelineStage::reduce_gradients() {
  for (auto& unit : units_) unit->start_reduce(/*last_micro_batch=*/true);
  for (auto& unit : units_) unit->finish_reduce();
}

double PipelineStage::clip_grad_norm(double max_norm) {
  std::vector<ShardUnit*> units;
  for (auto& unit : units_) units.push_back(unit.get());
  return clip_units_grad_norm(units, *world_, max_norm);
}

int64_t PipelineStage::resident_bytes() const {
  int64_t bytes = 0;
  for (const auto& unit : units_) bytes += unit->resident_bytes();
  return bytes;
}

}  // namespace xtrain::parallel
