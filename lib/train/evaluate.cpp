#include "train/evaluate.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>
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

// How many of the labelled positions' top-1 predictions are their targets; only those rows'
// logits are formed.
torch::Tensor correct_predictions(model::CausalLM& model, const torch::Tensor& hidden, const torch::Tensor& labels) {
  const auto flat_labels = labels.reshape({-1});
  const auto labelled = flat_labels.ne(data::kIgnoreIndex).nonzero().squeeze(1);
  const auto rows = hidden.reshape({-1, hidden.size(-1)}).index_select(0, labelled);
  const auto logits = torch::nn::functional::linear(rows, model.output_weight(), model.output_bias());
  return logits.argmax(-1).eq(flat_labels.index_select(0, labelled)).sum().to(torch::kFloat64);
}

}  // namespace

std::string accuracy_text(const EvalResult& result) {
  return std::isnan(result.accuracy) ? std::string() : fmt::format(" | accuracy {:.4f}", result.accuracy);
}

std::vector<data::MicroBatch> eval_micro_batches(const data::SampleDataset& dataset, int64_t micro_batch_size,
                                                 int64_t max_batches, bool pack) {
  std::vector<data::MicroBatch> batches;
  for_each_eval_batch(dataset, micro_batch_size, max_batches, pack,
                      [&](data::MicroBatch batch) { batches.push_back(std::move(batch)); });
  return batches;
}

MicroBatchScore score_micro_batch(model::CausalLM& model, const data::MicroBatch& batch, config::Dtype dtype,
                                  int64_t loss_chunk_tokens) {
  const auto device = model.output_weight().device();
  PrecisionScope precision(dtype, device.type());
  const auto inputs = model_batch(batch, device);
  const auto hidden = model.forward(inputs).hidden;
  const auto loss = next_token_loss_of_hidden(model, hidden, inputs.labels, loss_chunk_tokens);
  MicroBatchScore score{loss.detach().to(torch::kFloat64) * static_cast<double>(batch.target_count), {}};
  if (!model.tensor_parallel()) score.correct = correct_predictions(model, hidden, inputs.labels);
  return score;
}

EvalResult evaluate(model::CausalLM& model, const data::SampleDataset& dataset,
                    int64_t micro_batch_size, int64_t max_batches, config::Dtype dtype,
                    int64_t loss_chunk_tokens, bool pack) {
  torch::NoGradGuard no_grad;
  model.eval();
  const auto options = torch::TensorOptions().dtype(torch::kFloat64).device(model.output_weight().device());
  auto loss_sum = torch::zeros({}, options), correct = torch::zeros({}, options);  // read once
  const bool accuracy = !model.tensor_parallel();
  int64_t tokens = 0;
  for_each_eval_batch(dataset, micro_batch_size, max_batches, pack, [&](const data::MicroBatch& batch) {
    const auto score = score_micro_batch(model, batch, dtype, loss_chunk_tokens);
    loss_sum.add_(score.loss_sum);
    if (accuracy) correct.add_(score.correct);
    tokens += batch.target_count;
  });
  model.train();
  EvalResult result;
  result.tokens = tokens;
  result.loss = tokens ? loss_sum.item<double>() / static_cast<double>(tokens) : 0.0;
  if (accuracy && tokens) result.accuracy = correct.item<double>() / static_cast<double>(tokens);
  result.perplexity = std::exp(result.loss);
  return result;
}

}  // namespace xtrain::train
