#include "train/training_loss.h"

#include <algorithm>

#include <torch/torch.h>

#include "data/sample_dataset.h"
#include "layout/loss_chunking.h"
#include "memory/chunked_loss.h"
#include "model/attention/attention.h"

namespace xtrain::train {

int64_t loss_chunk_tokens(const config::Recipe& recipe) {
  return layout::loss_chunk_tokens(recipe.memory.chunked_loss, recipe.model.vocab_size,
                                   recipe.train.micro_batch_size * recipe.data.seq_len);
}

torch::Tensor next_token_loss_of_hidden(model::CausalLM& model, const torch::Tensor& hidden, const torch::Tensor& labels,
                                        int64_t chunk_tokens, memory::WeightGrad output_weight_grad) {
  const auto flat_targets = labels.reshape({-1});
  // Tensor parallelism never forms the whole vocabulary's logits: the loss is chunked (one chunk
  // when the recipe turns chunking off).
  const auto& tensor_parallel = model.tensor_parallel();
  if (chunk_tokens > 0 || tensor_parallel) {
    const memory::VocabParallel vocab{tensor_parallel.get(), model.vocab_first()};
    const int64_t rows = hidden.numel() / hidden.size(-1);
    return memory::chunked_cross_entropy(hidden.reshape({-1, hidden.size(-1)}), model.output_weight(), flat_targets,
                                         chunk_tokens > 0 ? chunk_tokens : std::max<int64_t>(rows, 1),
                                         data::kIgnoreIndex, vocab, model.output_bias(), output_weight_grad);
  }
  auto logits = torch::nn::functional::linear(hidden, model.output_weight(), model.output_bias());
  auto wide = logits.to(at::promote_types(logits.scalar_type(), torch::kFloat32));
  // A sum over the counted targets rather than the mean reduction, which is NaN for a batch
  // without any target (possible in chat data); chunked_cross_entropy gives 0 there too.
  namespace F = torch::nn::functional;
  auto sum = F::cross_entropy(wide.reshape({-1, wide.size(-1)}), flat_targets,
                              F::CrossEntropyFuncOptions().ignore_index(data::kIgnoreIndex).reduction(torch::kSum));
  return sum / flat_targets.ne(data::kIgnoreIndex).sum().clamp_min(1).to(sum.scalar_type());
}

std::string depth_loss_name(int64_t k) { return "mtp_" + std::to_string(k); }

torch::Tensor labels_ahead(const torch::Tensor& labels, int64_t k, const torch::Tensor& cu_seqlens) {
  const int64_t length = labels.size(1);
  auto ahead = torch::full_like(labels, data::kIgnoreIndex);
  if (k >= length) return ahead;
  ahead.narrow(1, 0, length - k).copy_(labels.narrow(1, k, length - k));
  if (!cu_seqlens.defined()) return ahead;
  const auto doc = model::document_ids(cu_seqlens, length).to(labels.device());
  const auto crosses = doc.narrow(0, 0, length - k).ne(doc.narrow(0, k, length - k));
  ahead.narrow(1, 0, length - k).masked_fill_(crosses.unsqueeze(0), data::kIgnoreIndex);
  return ahead;
}

namespace {
// Depth k's loss: the mean over its targets, or under context parallelism this rank's part of
// the whole micro batch's mean (its sum over the whole count), which the cp ranks' backward adds up.
torch::Tensor depth_loss(model::CausalLM& model, const model::Batch& batch, const torch::Tensor& hidden, int64_t k,
                         int64_t chunk_tokens, memory::WeightGrad output_weight_grad) {
  const auto index = static_cast<size_t>(k - 1);
  if (batch.labels_ahead.empty())
    return next_token_loss_of_hidden(model, hidden, labels_ahead(batch.labels, k, batch.layout.cu_seqlens),
                                     chunk_tokens, output_weight_grad);
  const auto& targets = batch.labels_ahead.at(index);
  const auto mean = next_token_loss_of_hidden(model, hidden, targets, chunk_tokens, output_weight_grad);
  const auto local = targets.ne(data::kIgnoreIndex).sum().to(mean.scalar_type());
  return mean * local / static_cast<double>(std::max<int64_t>(batch.labels_ahead_counts.at(index), 1));
}
}  // namespace

BatchLoss training_loss(model::CausalLM& model, const model::Batch& batch, int64_t chunk_tokens,
                        memory::WeightGrad output_weight_grad) {
  return output_loss(model, batch, model.forward(batch), chunk_tokens, output_weight_grad);
}

BatchLoss output_loss(model::CausalLM& model, const model::Batch& batch, model::ModelOutput output,
                      int64_t chunk_tokens, memory::WeightGrad output_weight_grad) {
  // A family that computes its own loss (clip's contrastive): nothing to project.
  if (output.loss.defined()) {
    BatchLoss own;
    own.loss = output.loss;
    own.aux_losses = std::move(output.aux_losses);
    return own;
  }
  // Several losses through one output weight: each adds its gradient in backward, none may take
  // the weight's fresh gradient buffer for itself.
  if (!output.mtp_hidden.empty() && output_weight_grad == memory::WeightGrad::into_fresh_grad)
    output_weight_grad = memory::WeightGrad::into_existing_grad;
  BatchLoss result{next_token_loss_of_hidden(model, output.hidden, batch.labels, chunk_tokens, output_weight_grad),
                   std::move(output.aux_losses), output.expert_load, output.dropped, {}, {}};
  const auto depths = static_cast<int64_t>(output.mtp_hidden.size());
  for (int64_t k = 1; k <= depths; ++k) {
    const auto loss = depth_loss(model, batch, output.mtp_hidden[static_cast<size_t>(k - 1)], k, chunk_tokens,
                                 output_weight_grad);
    result.depth_losses.emplace_back(depth_loss_name(k), loss.detach());
    const auto weighted = loss * (model.config().mtp_loss_weight / static_cast<double>(depths));
    result.mtp_loss = result.mtp_loss.defined() ? result.mtp_loss + weighted : weighted;
  }
  return result;
}

model::Batch model_batch(const torch::Tensor& inputs, const torch::Tensor& targets, const torch::Tensor& cu_seqlens,
                         const torch::Device& device) {
  model::Batch batch;
  batch.input_ids = inputs.to(device, /*non_blocking=*/true);
  batch.labels = targets.to(device, /*non_blocking=*/true);
  if (cu_seqlens.defined()) batch.layout = model::packed_layout(cu_seqlens, device);
  return batch;
}

model::Batch model_batch(const data::MicroBatch& batch, const torch::Device& device) {
  auto out = model_batch(batch.inputs, batch.targets, batch.cu_seqlens, device);
  if (batch.encoder_length > 0) {  // [encoder input | decoder input]; the targets are the decoder's
    const int64_t decoder_length = out.input_ids.size(1) - batch.encoder_length;
    out.decoder_input_ids = out.input_ids.narrow(1, batch.encoder_length, decoder_length);
    out.labels = out.labels.narrow(1, batch.encoder_length, decoder_length);
    out.input_ids = out.input_ids.narrow(1, 0, batch.encoder_length);
  }
  if (batch.context) out.layout = model::context_layout(out.layout, batch.context, device);
  for (size_t k = 0; k < batch.inputs_ahead.size(); ++k) {
    out.ids_ahead.push_back(batch.inputs_ahead[k].to(device, /*non_blocking=*/true));
    out.labels_ahead.push_back(batch.targets_ahead[k].to(device, /*non_blocking=*/true));
  }
  out.labels_ahead_counts = batch.whole_ahead_counts;
  if (batch.pixel_values.defined()) out.extra["pixel_values"] = batch.pixel_values.to(device, /*non_blocking=*/true);
  return out;
}

}  // namespace xtrain::train
