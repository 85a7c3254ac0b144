#include "model/deepseek/multi_token_prediction.h"

#include <torch/torch.h>

#include "model/llama.h"

namespace xtrain::model {

SharedHeadImpl::SharedHeadImpl(int64_t hidden_size, double eps) {
  norm = register_module("norm", RMSNorm(hidden_size, eps));
}

MtpLayerImpl::MtpLayerImpl(const ModelConfig& config, const DecoderParts& parts, int64_t layer)
    : DecoderLayerImpl(config, parts, layer) {
  enorm = register_module("enorm", RMSNorm(config.hidden_size, config.norm_eps));
  hnorm = register_module("hnorm", RMSNorm(config.hidden_size, config.norm_eps));
  eh_proj = register_module("eh_proj", Linear(2 * config.hidden_size, config.hidden_size, false));
  shared_head = register_module("shared_head", SharedHead(config.hidden_size, config.norm_eps));
}

torch::Tensor MtpLayerImpl::forward_ahead(const torch::Tensor& pair, const RotaryTables& rotary,
                                          const SequenceLayout& layout, double loss_weight,
                                          const torch::Tensor& balance_coefficients) {
  const auto halves = pair.chunk(2, -1);
  const auto joined = torch::cat({enorm(halves[0]), hnorm(halves[1])}, -1);
  const auto combined = partial_gradient
                            ? eh_proj->project_with(joined, partial_gradient->shared(eh_proj->weight), torch::Tensor())
                            : eh_proj(joined);
  const auto states = forward(combined, rotary, layout, loss_weight, balance_coefficients);
  return torch::cat({states, shared_head->norm(states)}, -1);
}

void MtpLayerImpl::describe_init(const std::string& name, double std, double output_std, InitPlan& plan) const {
  DecoderLayerImpl::describe_init(name, std, output_std, plan);
  enorm->describe_init(name + ".enorm", plan);
  hnorm->describe_init(name + ".hnorm", plan);
  eh_proj->describe_init(name + ".eh_proj", std, plan);
  shared_head->norm->describe_init(name + ".shared_head.norm", plan);
}

void MtpLayerImpl::set_fused_kernels(bool fused) {
  DecoderLayerImpl::set_fused_kernels(fused);
  enorm->set_fused_kernels(fused);
  hnorm->set_fused_kernels(fused);
  shared_head->norm->set_fused_kernels(fused);
}

void MtpLayerImpl::float8_layers(const std::string& name, Float8Layers& layers) {
  DecoderLayerImpl::float8_layers(name, layers);
  layers.linears.emplace_back(module_name(name, "eh_proj"), eh_proj.get());
}

MultiTokenPrediction::MultiTokenPrediction(const ModelConfig& config, const DecoderParts& parts, LlamaBodyImpl& body)
    : num_layers_(config.num_layers) {
  // The depths follow the decoder's layers, as in DeepSeek's checkpoints.
  for (int64_t i = 0; i < config.mtp_layers; ++i) {
    depths_.push_back(MtpLayer(config, parts, config.num_layers + i));
    body.append_layer(depths_.back().ptr());
  }
}

void MultiTokenPrediction::use_tensor_parallel(const std::shared_ptr<TensorParallelOps>& ops) {
  const std::shared_ptr<TensorParallelOps> partial = ops && ops->sequence_parallel() ? ops : nullptr;
  for (auto& depth : depths_) {
    depth->enorm->partial_gradient = partial;
    depth->hnorm->partial_gradient = partial;
    depth->shared_head->norm->partial_gradient = partial;
    depth->partial_gradient = partial;
  }
}

torch::Tensor ids_ahead(const torch::Tensor& input_ids, int64_t k) {
  auto ahead = torch::zeros_like(input_ids);
  const int64_t length = input_ids.size(1);
  if (k < length) ahead.narrow(1, 0, length - k).copy_(input_ids.narrow(1, k, length - k));
  return ahead;
}

namespace {
// Depth k's ids for k = 1..depths: the batch's own (shifted before a context split) or ids_ahead
// of its rows.
std::vector<torch::Tensor> tokens_ahead(const Batch& batch, int64_t depths) {
  std::vector<torch::Tensor> blocks;
  for (int64_t k = 1; k <= depths; ++k)
    blocks.push_back(batch.ids_ahead.empty() ? ids_ahead(batch.input_ids, k)
                                             : batch.ids_ahead.at(static_cast<size_t>(k - 1)));
  return blocks;
}

// The lookups of `blocks` (each [B, T], stacked along the rows), as [blocks, B, T, hidden].
torch::Tensor look_up(LlamaBodyImpl& body, const std::vector<torch::Tensor>& blocks, const EmbedRunner& embed_runner) {
  const auto looked_up = body.embed(torch::cat(blocks, 0), embed_runner);
  return looked_up.view({static_cast<int64_t>(blocks.size()), blocks.front().size(0), looked_up.size(1),
                         looked_up.size(2)});
}
}  // namespace

void MultiTokenPrediction::forward(LlamaBodyImpl& body, const Batch& batch, const BlockRunner& block_runner,
                                   const EmbedRunner& embed_runner, const torch::Tensor& balance_coefficients,
                                   ModelOutput& output) const {
  body.check_length(batch.input_ids, batch.layout);
  const auto depths = static_cast<int64_t>(depths_.size());
  auto tokens = tokens_ahead(batch, depths);
  tokens.insert(tokens.begin(), batch.input_ids);
  const auto looked_up = look_up(body, tokens, embed_runner);
  output.hidden = body.norm(body.run_layers(looked_up[0], batch.layout, block_runner, 0, num_layers_,
                                            batch.loss_weight, balance_coefficients));
  output.mtp_hidden = predict_ahead(body, batch, block_runner, output.hidden, looked_up.narrow(0, 1, depths),
                                    balance_coefficients);
}

std::vector<torch::Tensor> MultiTokenPrediction::forward_after(LlamaBodyImpl& body, const Batch& batch,
                                                               const BlockRunner& block_runner,
                                                               const EmbedRunner& embed_runner,
                                                               const torch::Tensor& hidden,
                                                               const torch::Tensor& balance_coefficients) const {
  const auto embedded = look_up(body, tokens_ahead(batch, static_cast<int64_t>(depths_.size())), embed_runner);
  return predict_ahead(body, batch, block_runner, hidden, embedded, balance_coefficients);
}

std::vector<torch::Tensor> MultiTokenPrediction::predict_ahead(LlamaBodyImpl& body, const Batch& batch,
                                                               const BlockRunner& block_runner, torch::Tensor previous,
                                                               const torch::Tensor& embedded,
                                                               const torch::Tensor& balance_coefficients) const {
  std::vector<torch::Tensor> states;
  const int64_t hidden = previous.size(-1);
  for (size_t k = 0; k < depths_.size(); ++k) {
    const int64_t index = num_layers_ + static_cast<int64_t>(k);
    auto* layer = depths_[k].ptr().get();
    const auto coefficients = balance_coefficients.defined() ? balance_coefficients[index] : torch::Tensor();
    // Captures by value: a block runner may keep this callable until backward.
    auto block = [body = &body, layer, layout = batch.layout, loss_weight = batch.loss_weight,
                  coefficients](const torch::Tensor& pair) {
      return layer->forward_ahead(pair, body->rotary(), layout, loss_weight, coefficients);
    };
    const auto pair = torch::cat({embedded[static_cast<int64_t>(k)], previous}, -1);
    const auto out = block_runner ? block_runner(index, pair, block) : block(pair);
    previous = out.narrow(-1, 0, hidden);
    states.push_back(out.narrow(-1, hidden, hidden));
  }
  return states;
}

}  // namespace xtrain::model
