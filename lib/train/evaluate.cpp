#include "train/evaluate.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <torch/torch.h>

#include "data/micro_batch.h"
#include "train/precision.h"
#include "train/training_loss.h"

namespace xtrain::train {

namespace {

// Calls visit(micro batch) for each micro batch that evaluate() scores, made one at a time.
template <typename Visit>
void for_each_eval_batch(const data::SampleDataset& dataset, int64_t micro_batch_size, int64_t max_batches, bool pack,
                         Visit&& visit) {
  int64_t samples = dataset.num_samples();
  if (max_batches > 0) samples = std::min(samples, max_batches * micro_batch_size);
  for (int64_t first = 0; first < samples; first += micro_batch_size) {
    std::vector<int64_t> indices(static_cast<size_t>(std::min(micro_batch_size, samples - first)));
    std::iota(indices.begin(), indices.end(), first);
    visit(data::make_micro_batch(dataset, indices, pack));
  }
}

}  // namespace

std::vector<data::MicroBatch> eval_micro_batches(const data::SampleDataset& dataset, int64_t micro_batch_size,
                                                 int64_t max_batches, bool pack) {
  std::vector<data::MicroBatch> batches;
  for_each_eval_batch(dataset, micro_batch_size, max_batches, pack,
                      [&](data::MicroBatch batch) { batches.push_back(std::move(batch)); });
  return batches;
}

EvalResult evaluate(model::CausalLM& model, const data::SampleDataset& dataset,
                    int64_t micro_batch_size, int64_t max_batches, const std::string& dtype,
                    int64_t loss_chunk_tokens, bool pack) {
  torch::NoGradGuard no_grad;
  model.eval();
  const auto device = model.output_weight().device();
  auto loss_sum = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat64).device(device));  // read once
  int64_t tokens = 0;
  for_each_eval_batch(dataset, micro_batch_size, max_batches, pack, [&](const data::MicroBatch& batch) {
    PrecisionScope precision(dtype, device.type());
    const auto loss =
        training_loss(model, model_batch(batch.inputs, batch.targets, batch.cu_seqlens, device), loss_chunk_tokens).loss;
    loss_sum.add_(loss.detach().to(torch::kFloat64) * static_cast<double>(batch.target_count));
    tokens += batch.target_count;
  });
  model.train();
  EvalResult result;
  result.tokens = tokens;
  result.loss = tokens ? loss_sum.item<double>() / static_cast<double>(tokens) : 0.0;
  result.perplexity = std::exp(result.loss);
  return result;
}

}  // namespace xtrain::train
