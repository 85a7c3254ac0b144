#include "data/micro_batch.h"

#include <torch/torch.h>

namespace xtrain::data {

namespace {

// Piece lengths of seq inputs given the document starts in [1, seq].
std::vector<int64_t> piece_lengths(const std::vector<int64_t>& starts, int64_t seq) {
  std::vector<int64_t> lengths;
  int64_t begin = 0;
  for (int64_t start : starts) {
    if (start >= seq) break;  // a document beginning at the last token starts no input
    lengths.push_back(start - begin);
    begin = start;
  }
  lengths.push_back(seq - begin);
  return lengths;
}

}  // namespace

std::vector<int64_t> document_piece_lengths(const SampleDataset& dataset, int64_t global_index) {
  return piece_lengths(dataset.document_starts(global_index), dataset.seq_len());
}

double attention_cost(const SampleDataset& dataset, int64_t global_index, bool pack) {
  const auto seq = static_cast<double>(dataset.seq_len());
  const double vision = dataset.vision_cost(global_index);
  if (!pack) return seq * seq + vision;
  double cost = vision;
  for (int64_t length : document_piece_lengths(dataset, global_index))
    cost += static_cast<double>(length) * static_cast<double>(length);
  return cost;
}

MicroBatch make_micro_batch(const SampleDataset& dataset, const std::vector<int64_t>& samples, bool pack) {
  const auto rows = static_cast<int64_t>(samples.size());
  const int64_t seq = dataset.seq_len();
  auto inputs = torch::empty({rows, seq}, torch::kInt64);
  auto targets = torch::empty({rows, seq}, torch::kInt64);
  std::vector<int64_t> cu_seqlens{0};
  std::vector<torch::Tensor> pixel_values;
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t g = samples[static_cast<size_t>(row)];
    inputs[row].copy_(dataset.batch(g, 1)[0].narrow(0, 0, seq));
    targets[row].copy_(dataset.targets(g, 1)[0]);
    if (auto pixels = dataset.pixel_values(g); pixels.defined()) pixel_values.push_back(std::move(pixels));
    if (!pack) continue;
    auto* row_targets = targets[row].data_ptr<int64_t>();
    const std::vector<int64_t> starts = dataset.document_starts(g);
    for (int64_t start : starts) row_targets[start - 1] = kIgnoreIndex;
    for (int64_t length : piece_lengths(starts, seq)) cu_seqlens.push_back(cu_seqlens.back() + length);
  }
  MicroBatch batch;
  batch.sample_ids = torch::tensor(samples, torch::kInt64);
  batch.encoder_length = dataset.encoder_length();
  if (!pixel_values.empty()) batch.pixel_values = torch::cat(pixel_values);
  batch.target_count = dataset.preference_pairs() ? rows / 2 : targets.ne(kIgnoreIndex).sum().item<int64_t>();
  if (pack) {
    batch.inputs = inputs.reshape({1, rows * seq});
    batch.targets = targets.reshape({1, rows * seq});
    batch.cu_seqlens = torch::tensor(cu_seqlens, torch::kInt64);
  } else {
    batch.inputs = inputs;
    batch.targets = targets;
  }
  return batch;
}

}  // namespace xtrain::data
