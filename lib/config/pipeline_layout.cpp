#include "config/pipeline_layout.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace xtrain::config {

std::vector<PipelineChunk> pipeline_chunks(int64_t layers, int64_t chunks) {
  if (chunks < 1 || layers + 2 < chunks)
    throw std::invalid_argument(std::to_string(layers) + " layers and the embedding and head do not fill " +
                                std::to_string(chunks) + " pipeline chunks");
  const int64_t slots = layers + 2;
  std::vector<PipelineChunk> all;
  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t begin = k * slots / chunks, end = (k + 1) * slots / chunks;
    // Slot 0 is the embedding, slot j in 1..L layer j - 1, slot L + 1 the head.
    all.push_back({std::max<int64_t>(begin, 1) - 1, std::min(end, layers + 1) - 1, begin == 0, end == slots});
  }
  return all;
}

namespace {

// Megatron's order: forwards k = 0, 1, ... take chunk (k mod pv) / p and micro batch
// (k / pv) p + k mod p; backwards the chunks the other way round.
PipelineAction interleaved(int64_t k, bool forward, int64_t stages, int64_t virtual_stages) {
  const int64_t group = stages * virtual_stages;
  int64_t chunk = (k % group) / stages;
  if (!forward) chunk = virtual_stages - 1 - chunk;
  return {forward, chunk, (k / group) * stages + k % stages};
}

}  // namespace

std::vector<PipelineAction> pipeline_actions(PpSchedule schedule, int64_t stages, int64_t virtual_stages,
                                             int64_t rank, int64_t micro_batches) {
  std::vector<PipelineAction> actions;
  bool interleave = false;
  switch (schedule) {
    case PpSchedule::gpipe:
      for (int64_t m = 0; m < micro_batches; ++m) actions.push_back({true, 0, m});
      for (int64_t m = 0; m < micro_batches; ++m) actions.push_back({false, 0, m});
      return actions;
    case PpSchedule::one_f_one_b: break;
    case PpSchedule::interleaved_1f1b: interleave = true; break;
  }
  const int64_t v = interleave ? virtual_stages : 1;
  const int64_t total = micro_batches * v;
  const int64_t warmup =
      std::min(total, interleave ? (stages - rank - 1) * 2 + (v - 1) * stages : stages - rank - 1);
  auto forward = [&](int64_t k) { actions.push_back(interleaved(k, true, stages, v)); };
  auto backward = [&](int64_t k) { actions.push_back(interleaved(k, false, stages, v)); };
  for (int64_t k = 0; k < warmup; ++k) forward(k);
  for (int64_t k = 0; k < total - warmup; ++k) {
    forward(warmup + k);
    backward(k);
  }
  for (int64_t k = total - warmup; k < total; ++k) backward(k);
  return actions;
}

}  // namespace xtrain::config
