#include "train/training_loss.h"

#include <torch/torch.h>

#include "data/sample_dataset.h"
#include "memory/chunked_loss.h"

namespace xtrain::train {

int64_t loss_chunk_tokens(const config::Recipe& recipe) {
  const auto& spec = recipe.memory.chunked_loss;
  if (spec == "off") return 0;
  const int64_t tokens_per_micro_batch = recipe.train.micro_batch_size * recipe.data.seq_len;
  if (spec == "auto") return memory::auto_chunk_tokens(recipe.model.vocab_size, tokens_per_micro_batch);
  return std::stoll(spec);
}

torch::Tensor training_loss(model::LlamaForCausalLM& model, const torch::Tensor& inputs, const torch::Tensor& targets,
                            int64_t chunk_tokens, const model::SequenceLayout& layout) {
  const auto flat_targets = targets.reshape({-1});
  if (chunk_tokens > 0) {
    auto hidden = model->model(inputs, layout);
    return memory::chunked_cross_entropy(hidden.reshape({-1, hidden.size(-1)}), model->output_weight(), flat_targets,
                                         chunk_tokens, data::kIgnoreIndex);
  }
  auto logits = model(inputs, layout);
  auto wide = logits.to(at::promote_types(logits.scalar_type(), torch::kFloat32));
  // A sum over the counted targets rather than the mean reduction, which is NaN for a batch
  // without any target (possible in chat data); chunked_cross_entropy gives 0 there too.
  namespace F = torch::nn::functional;
  auto sum = F::cross_entropy(wide.reshape({-1, wide.size(-1)}), flat_targets,
                              F::CrossEntropyFuncOptions().ignore_index(data::kIgnoreIndex).reduction(torch::kSum));
  return sum / flat_targets.ne(data::kIgnoreIndex).sum().clamp_min(1).to(sum.scalar_type());
}

}  // namespace xtrain::train
