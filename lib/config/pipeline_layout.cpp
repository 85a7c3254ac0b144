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

int64_t PipelinePlacement::global_chunk(int64_t rank, int64_t local) const {
  if (v_shape) return local == 0 ? rank : 2 * stages - 1 - rank;
  return local * stages + rank;
}

int64_t PipelinePlacement::rank_of(int64_t global) const {
  if (v_shape) return global < stages ? global : 2 * stages - 1 - global;
  return global % stages;
}

PipelinePlacement pipeline_placement(PpSchedule schedule, int64_t stages, int64_t virtual_stages) {
  return {stages, virtual_stages, schedule == PpSchedule::zbv};
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

// ZBV (Qi et al., section 6; PyTorch's ScheduleZBVZeroBubble): two chunks a rank in a V, local
// chunk 0 on the way down the ranks and 1 on the way back. Warm-up: 2 (pp - rank) - 1 forwards of
// chunk 0, rank pairs of forwards (1, 0), then pp - rank rounds of chunk 1's F, I, W; steady: F0
// I0 W0 F1 I1 W1; cool-down: rank pairs of input gradients (0, 1), pp - rank rounds of I0 and the
// oldest W0 left, then every W1 and W0 left. It is laid out for at least 2 pp - 1 micro batches, as
// PyTorch does, and the actions of micro batches past the step's are left out.
std::vector<PipelineAction> zero_bubble_v(int64_t stages, int64_t rank, int64_t micro_batches) {
  using Part = PipelineAction::Part;
  const int64_t n = std::max(2 * stages - 1, micro_batches);
  std::vector<PipelineAction> all;
  int64_t f[2] = {0, 0}, b[2] = {0, 0}, w[2] = {0, 0};
  auto forward = [&](int c) { all.push_back({true, c, f[c]++}); };
  auto input = [&](int c) { all.push_back({false, c, b[c]++, Part::input}); };
  auto weight = [&](int c) { all.push_back({false, c, w[c]++, Part::weight}); };
  for (int64_t k = 0; k < 2 * (stages - rank) - 1; ++k) forward(0);
  for (int64_t k = 0; k < rank; ++k) forward(1), forward(0);
  for (int64_t k = 0; k < stages - rank; ++k) forward(1), input(1), weight(1);
  while (f[1] < f[0] || f[0] < n) {
    if (f[0] < n) forward(0);
    input(0), weight(0);
    forward(1), input(1), weight(1);
  }
  for (int64_t k = 0; k < rank; ++k) input(0), input(1);
  for (int64_t k = 0; k < stages - rank; ++k) input(0), weight(0);
  while (w[1] < b[1]) weight(1);
  while (w[0] < b[0]) weight(0);
  std::vector<PipelineAction> actions;
  for (const auto& a : all)
    if (a.micro_batch < micro_batches) actions.push_back(a);
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
    case PpSchedule::zbv: return zero_bubble_v(stages, rank, micro_batches);
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
  const auto placement = pipeline_placement(schedule, stages, virtual_stages);
  std::string text;
  for (int64_t rank = 0; rank < stages; ++rank) {
    text += "rank " + std::to_string(rank) + ":";
    for (const auto& a : pipeline_actions(schedule, stages, virtual_stages, rank, micro_batches)) {
      const char kind = a.forward ? 'F' : a.part == Part::input ? 'I' : a.part == Part::weight ? 'W' : 'B';
      text += " " + std::to_string(placement.global_chunk(rank, a.chunk)) + kind + std::to_string(a.micro_batch);
    }
    text += "\n";
  }
  return text;
}

}  // namespace xtrain::config
