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

// ZB-H1 (Qi et al., Zero Bubble Pipeline Parallelism): 1f1b's warm-up and order of forwards and
// input gradients, the weight gradients of micro batch 0, 1, ... each after the input gradient
// of micro batch rank, rank + 1, ... and the rest at the end, so that W fills the cooldown's
// waits. At most pp micro batches are held on any rank, as 1f1b holds on rank 0.
std::vector<PipelineAction> zero_bubble_h1(int64_t stages, int64_t rank, int64_t micro_batches) {
  using Part = PipelineAction::Part;
  std::vector<PipelineAction> actions;
  const int64_t warmup = std::min(micro_batches, stages - rank - 1);
  int64_t forwards = 0, weights = 0;
  for (; forwards < warmup; ++forwards) actions.push_back({true, 0, forwards});
  for (int64_t b = 0; b < micro_batches; ++b) {
    if (forwards < micro_batches) actions.push_back({true, 0, forwards++});
    actions.push_back({false, 0, b, Part::input});
    if (b >= rank) actions.push_back({false, 0, weights++, Part::weight});
  }
  while (weights < micro_batches) actions.push_back({false, 0, weights++, Part::weight});
  return actions;
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
    case PpSchedule::zb_h1: return zero_bubble_h1(stages, rank, micro_batches);
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

std::string format_pipeline_actions(PpSchedule schedule, int64_t stages, int64_t virtual_stages,
                                    int64_t micro_batches) {
  using Part = PipelineAction::Part;
  std::string text;
  for (int64_t rank = 0; rank < stages; ++rank) {
    text += "rank " + std::to_string(rank) + ":";
    for (const auto& a : pipeline_actions(schedule, stages, virtual_stages, rank, micro_batches)) {
      const char kind = a.forward ? 'F' : a.part == Part::input ? 'I' : a.part == Part::weight ? 'W' : 'B';
      text += " " + std::to_string(a.chunk * stages + rank) + kind + std::to_string(a.micro_batch);
    }
    text += "\n";
  }
  return text;
}

}  // namespace xtrain::config
