#include "model/causal_lm.h"

#include <stdexcept>

#include <fmt/format.h>
#include <torch/torch.h>

#include "model/layers/moe.h"

namespace xtrain::model {

int64_t CausalLM::vocab_first() const {
  if (!tensor_parallel_) return 0;
  return split_share(config_.vocab_size, tensor_parallel_->rank(), tensor_parallel_->size()).first;
}

torch::Tensor CausalLM::logits(const Batch& batch) {
  auto logits = torch::nn::functional::linear(forward(batch).hidden, output_weight(), output_bias());
  if (!tensor_parallel_) return logits;
  std::vector<int64_t> sizes;
  for (int64_t r = 0; r < tensor_parallel_->size(); ++r)
    sizes.push_back(split_share(config_.vocab_size, r, tensor_parallel_->size()).count);
  return tensor_parallel_->gather_last_dim(logits, sizes);
}

namespace {

// A family's capability that the recipe check should have refused to use (model/spec/model_spec.h).
[[noreturn]] void missing_capability(const ModelConfig& config, const char* capability, const char* method) {
  throw std::invalid_argument(fmt::format("CausalLM::{} called on a {} model, whose ModelSpec lacks "
                                          "capabilities.{}: the recipe check should have refused this layout",
                                          method, config.family, capability));
}

}  // namespace

TensorParallelPlan CausalLM::tensor_parallel_plan(int64_t, int64_t) const {
  missing_capability(config_, "tensor_parallel", "tensor_parallel_plan");
}

void CausalLM::use_tensor_parallel(std::shared_ptr<TensorParallelOps>) {
  missing_capability(config_, "tensor_parallel", "use_tensor_parallel");
}

ModelOutput CausalLM::forward_chunk(const Batch&, const torch::Tensor&, int64_t, int64_t, bool, bool) {
  missing_capability(config_, "pipeline", "forward_chunk");
}

int64_t CausalLM::num_parameters() const {
  int64_t total = 0;
  for (const auto& p : parameters()) total += p.numel();
  return total;
}

int64_t CausalLM::num_active_parameters() const {
  int64_t idle = 0;
  for (const auto& [block_name, block] : moe_blocks()) {
    const int64_t experts = config_.num_experts, chosen = config_.num_experts_per_tok;
    for (const auto& [name, weight] : block->expert_weights()) idle += weight.numel() / experts * (experts - chosen);
  }
  return num_parameters() - idle;
}

torch::Tensor next_token_loss(CausalLM& model, const torch::Tensor& tokens) {
  const int64_t seq = tokens.size(1) - 1;
  Batch batch;
  batch.input_ids = tokens.narrow(1, 0, seq);
  auto targets = tokens.narrow(1, 1, seq);
  auto logits = model.logits(batch);
  auto wide = logits.to(at::promote_types(logits.scalar_type(), torch::kFloat32));
  return torch::nn::functional::cross_entropy(wide.reshape({-1, wide.size(-1)}), targets.reshape({-1}));
}

}  // namespace xtrain::model
