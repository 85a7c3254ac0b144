#include "config/pipeline_layout.h"

#include <algorithm>
#include <deque>
#include <stdexcept>
#include <string>

namespace xtrain::config {

std::vector<PipelineChunk> pipeline_chunks(int64_t layers, int64_t chunks, int64_t depths) {
  if (chunks < 1 || layers + 2 < chunks)
    throw std::invalid_argument(std::to_string(layers) + " layers and the embedding and head do not fill " +
                                std::to_string(chunks) + " pipeline chunks");
  const int64_t slots = layers + 2 + depths, head = layers + 1;
  // Cut k (0 < k < chunks) at k S / chunks, but early enough that the chunks after it each get a
  // slot up to the head's: without depths that bound never binds.
  auto cut = [&](int64_t k) { return k == chunks ? slots : std::min(k * slots / chunks, head - (chunks - 1 - k)); };
  std::vector<PipelineChunk> all;
  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t begin = cut(k), end = cut(k + 1);
    // Slot 0 is the embedding, slot j in 1..L layer j - 1, slot L + 1 the head, then the depths.
    const int64_t last = end == slots ? layers + depths : std::min(end, head) - 1;
    all.push_back({std::max<int64_t>(begin, 1) - 1, last, begin == 0, end == slots});
  }
  return all;
}

std::vector<PipelineChunk> pipeline_chunks(int64_t layers, int64_t chunks, int64_t depths,
                                           const std::vector<int64_t>& layers_per_chunk) {
  if (layers_per_chunk.empty()) return pipeline_chunks(layers, chunks, depths);
  auto fail = [&](const std::string& problem) {
    std::string list;
    for (int64_t n : layers_per_chunk) list += (list.empty() ? "" : ", ") + std::to_string(n);
    throw std::invalid_argument("[" + list + "]: " + problem);
  };
  if (static_cast<int64_t>(layers_per_chunk.size()) != chunks)
    fail("one count of layers a pipeline chunk, " + std::to_string(chunks) + " of them (parallel.pp x pp_virtual_stages)");
  int64_t sum = 0;
  for (size_t k = 0; k < layers_per_chunk.size(); ++k) {
    const bool end = k == 0 || k + 1 == layers_per_chunk.size();
    if (layers_per_chunk[k] < 0 || (layers_per_chunk[k] == 0 && !end))
      fail("chunk " + std::to_string(k) + " holds " + std::to_string(layers_per_chunk[k]) +
           " layers: a chunk between the first (the embedding's) and the last (the head's) holds at least one");
    sum += layers_per_chunk[k];
  }
  if (sum != layers) fail("the counts add up to " + std::to_string(sum) + ", not the model's " + std::to_string(layers) + " layers");
  std::vector<PipelineChunk> all;
  int64_t first = 0;
  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t last = first + layers_per_chunk[static_cast<size_t>(k)];
    all.push_back({first, k + 1 == chunks ? last + depths : last, k == 0, k + 1 == chunks});
    first = last;
  }
  return all;
}

std::string describe_pipeline_cut(const std::vector<PipelineChunk>& chunks, const PipelinePlacement& placement) {
  std::string text;
  for (size_t c = 0; c < chunks.size(); ++c) {
    const auto& chunk = chunks[c];
    std::vector<std::string> parts;
    if (chunk.embedding) parts.emplace_back("the embedding");
    const int64_t count = chunk.last_layer - chunk.first_layer;
    if (count == 1) parts.push_back("layer " + std::to_string(chunk.first_layer));
    if (count > 1)
      parts.push_back("layers " + std::to_string(chunk.first_layer) + "-" + std::to_string(chunk.last_layer - 1));
    if (chunk.head) parts.emplace_back("the head");
    std::string runs;
    for (const auto& part : parts) runs += (runs.empty() ? "" : ", ") + part;
    text += (c ? "; chunk " : "chunk ") + std::to_string(c) + " (rank " +
            std::to_string(placement.rank_of(static_cast<int64_t>(c))) + "): " + runs;
  }
  return text;
}

int64_t PipelinePlacement::global_chunk(int64_t rank, int64_t local) const {
  if (v_shape) return local == 0 ? rank : 2 * stages - 1 - rank;
  return local * stages + rank;
}

int64_t PipelinePlacement::rank_of(int64_t global) const {
  if (v_shape) return global < stages ? global : 2 * stages - 1 - global;
  return global % stages;
}

PipelinePlacement pipeline_placement(PpSchedule schedule, int64_t stages, int64_t virtual_stages,
                                     std::vector<int64_t> layers_per_chunk) {
  return {stages, virtual_stages, v_shaped(schedule), std::move(layers_per_chunk)};
}

std::string min_micro_batches_problem(PpSchedule schedule, int64_t stages, int64_t micro_batches) {
  return std::to_string(micro_batches) + " micro batches a step (global_batch_size / (micro_batch_size x data " +
         "ranks)): " + to_string(schedule) + " on parallel.pp " + std::to_string(stages) + " needs at least 2 pp = " +
         std::to_string(min_micro_batches(schedule, stages)) +
         " (its warm-up fills both chunks of the V before the first backward): raise train.global_batch_size or " +
         "lower train.micro_batch_size";
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

// DualPipeV (PyTorch's ScheduleDualPipeV, after DeepSeek's DualPipe): the V's two chunks, local
// chunk 0 on the way down. Warm-up: 2 (pp - rank - 1) forwards of chunk 0, rank + 1 pairs of
// forwards (0, 1), pp - rank - 1 rounds of I1, the oldest W, F1. Steady: n - 2 pp + rank + 1
// rounds of two overlapped pairs, F0 with B1 and F1 with B0 (the last rank's first F0 and B1 not
// paired). Cool-down: pp - rank - 1 rounds of B1 and the pair F1 with B0, rank + 1 rounds of
// backwards of chunk 1 then 0 (from the middle round on, split: I, the W left for later;
// odd ranks switch before chunk 1's, even ranks after it), pp - rank - 1 rounds of the oldest
// W and chunk 0's backward, and the W left. The weights wait in one queue, oldest first, over
// both chunks. PyTorch refuses fewer than 2 pp micro batches (min_micro_batches; the recipe
// check too); for the planner's sake fewer are laid out as 2 pp and the actions past them
// dropped, a pair whose half is dropped running as a lone action.
std::vector<PipelineAction> dual_pipe_v(int64_t stages, int64_t rank, int64_t micro_batches) {
  const int64_t n = std::max(2 * stages, micro_batches);
  using Part = PipelineAction::Part;
  std::vector<PipelineAction> actions;
  int64_t f[2] = {0, 0}, b[2] = {0, 0};
  std::deque<std::pair<int, int64_t>> weights;
  auto forward = [&](int c) { actions.push_back({true, c, f[c]++}); };
  auto backward = [&](int c, bool split) {
    actions.push_back({false, c, b[c], split ? Part::input : Part::whole});
    if (split) weights.emplace_back(c, b[c]);
    ++b[c];
  };
  auto weight = [&] {
    if (weights.empty()) return;
    actions.push_back({false, weights.front().first, weights.front().second, Part::weight});
    weights.pop_front();
  };
  auto overlap = [&](int forward_chunk) {
    forward(forward_chunk);
    actions.back().overlapped = true;
    backward(1 - forward_chunk, false);
  };
  const int64_t down = stages - rank - 1;
  for (int64_t k = 0; k < 2 * down; ++k) forward(0);
  for (int64_t k = 0; k <= rank; ++k) forward(0), forward(1);
  for (int64_t k = 0; k < down; ++k) backward(1, true), weight(), forward(1);
  for (int64_t i = 0; i < n - 2 * stages + rank + 1; ++i) {
    if (i == 0 && rank == stages - 1)
      forward(0), backward(1, false);
    else
      overlap(0);
    overlap(1);
  }
  for (int64_t k = 0; k < down; ++k) backward(1, false), overlap(1);
  bool split = false;
  for (int64_t i = 0; i <= rank; ++i) {
    if (i == (rank + 1) / 2 && rank % 2 == 1) split = true;
    backward(1, split);
    if (i == (rank + 1) / 2 && rank % 2 == 0) split = true;
    backward(0, split);
  }
  for (int64_t k = 0; k < down; ++k) weight(), backward(0, split);
  for (int64_t k = 0; k <= rank; ++k) weight();
  if (n == micro_batches) return actions;
  std::vector<PipelineAction> kept;
  for (size_t i = 0; i < actions.size(); ++i) {
    if (actions[i].micro_batch >= micro_batches) continue;
    kept.push_back(actions[i]);
    if (kept.back().overlapped) kept.back().overlapped = actions[i + 1].micro_batch < micro_batches;
  }
  return kept;
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
    case PpSchedule::dualpipev: return dual_pipe_v(stages, rank, micro_batches);
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
    auto name = [&](const PipelineAction& a) {
      const char kind = a.forward ? 'F' : a.part == Part::input ? 'I' : a.part == Part::weight ? 'W' : 'B';
      return std::to_string(placement.global_chunk(rank, a.chunk)) + kind + std::to_string(a.micro_batch);
    };
    const auto actions = pipeline_actions(schedule, stages, virtual_stages, rank, micro_batches);
    for (size_t i = 0; i < actions.size(); ++i)
      if (actions[i].overlapped && i + 1 < actions.size()) {
        text += " (" + name(actions[i]) + ";" + name(actions[i + 1]) + ")OVERLAP_F_B";
        ++i;
      } else {
        text += " " + name(actions[i]);
      }
    text += "\n";
  }
  return text;
}

}  // namespace xtrain::config
