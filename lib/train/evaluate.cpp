#include "train/evaluate.h"

#include <algorithm>
#include <cmath>

#include <torch/torch.h>

#include "train/precision.h"
#include "train/training_loss.h"

namespace xtrain::train {

EvalResult evaluate(model::LlamaForCausalLM& model, const data::SampleDataset& dataset,
                    int64_t micro_batch_size, int64_t max_batches, const std::string& dtype,
                    int64_t loss_chunk_tokens) {
  torch::NoGradGuard no_grad;
  model->eval();
  int64_t samples = dataset.num_samples();
  if (max_batches > 0) samples = std::min(samples, max_batches * micro_batch_size);
  double loss_sum = 0;
  int64_t tokens = 0;
  for (int64_t first = 0; first < samples; first += micro_batch_size) {
    const int64_t count = std::min(micro_batch_size, samples - first);
    auto batch = dataset.batch(first, count);
    auto targets = dataset.targets(first, count);
    PrecisionScope precision(dtype);
    const int64_t batch_tokens = targets.ne(data::kIgnoreIndex).sum().item<int64_t>();
    loss_sum += training_loss(model, batch, targets, loss_chunk_tokens).item<double>() * batch_tokens;
    tokens += batch_tokens;
  }
  model->train();
  EvalResult result;
  result.tokens = tokens;
  result.loss = tokens ? loss_sum / tokens : 0.0;
  result.perplexity = std::exp(result.loss);
  return result;
}

}  // namespace xtrain::train
