#include "dist/fully_sharded.h"

#include <algorithm>
#include <cmath>
#include <string>

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/torch.h>

namespace xtrain::dist {
namespace {

using torch::autograd::variable_list;
using BlockFn = std::function<torch::Tensor(const torch::Tensor&)>;

// The backward node of one sharded block. Forward ran the block on a detached copy of its input
// with its parameters gathered, keeping that inner graph; backward gathers the parameters again,
// runs the inner graph's backward, and hands the block's gradients to their reduction.
class ShardedBlockBackward : public torch::autograd::Node {
 public:
  FullyShardedModel* engine = nullptr;
  int64_t layer = 0;
  torch::Tensor inner_input, inner_output;

  std::string name() const override { return "xtrain::ShardedBlockBackward"; }

  variable_list apply(variable_list&& grad_outputs) override {
    engine->before_block_backward(layer);
    torch::autograd::backward({inner_output}, {grad_outputs[0]});
    engine->after_block_backward(layer);
    auto grad = inner_input.grad();
    inner_input = inner_output = torch::Tensor();
    return {grad};
  }
};

torch::Tensor run_sharded_block(FullyShardedModel* engine, int64_t layer, const torch::Tensor& x,
                                const BlockFn& block) {
  if (!torch::GradMode::is_enabled()) {
    engine->before_block_forward(layer);
    auto out = block(x);
    engine->after_block_forward(layer);
    return out;
  }
  auto node = std::shared_ptr<ShardedBlockBackward>(new ShardedBlockBackward(), torch::autograd::deleteNode);
  node->engine = engine;
  node->layer = layer;
  node->inner_input = x.detach().requires_grad_(x.requires_grad());
  engine->before_block_forward(layer);
  node->inner_output = block(node->inner_input);
  engine->after_block_forward(layer);
  auto output = node->inner_output.detach();
  node->set_next_edges(torch::autograd::collect_next_edges(x));
  torch::autograd::set_history(output, node);
  return output;
}

}  // namespace

FullyShardedModel::FullyShardedModel(model::LlamaForCausalLM model, DeviceMesh mesh, bool reshard_after_forward)
    : model_(std::move(model)), mesh_(std::move(mesh)), reshard_after_forward_(reshard_after_forward) {
  const int64_t layers = model_->config().num_layers;
  std::vector<std::pair<std::string, torch::Tensor>> root;
  std::vector<std::vector<std::pair<std::string, torch::Tensor>>> per_block(layers);
  const std::string prefix = "model.layers.";
  for (const auto& item : model_->named_parameters()) {
    const std::string& name = item.key();
    if (name.rfind(prefix, 0) == 0) {
      const int64_t layer = std::stoll(name.substr(prefix.size()));
      per_block.at(layer).emplace_back(name, item.value());
    } else {
      root.emplace_back(name, item.value());
    }
  }
  root_ = std::make_unique<ShardUnit>("root", std::move(root), mesh_.fsdp, mesh_.dp);
  for (int64_t i = 0; i < layers; ++i)
    blocks_.push_back(std::make_unique<ShardUnit>("model.layers." + std::to_string(i), std::move(per_block[i]),
                                                  mesh_.fsdp, mesh_.dp));
  // Wraps whatever runner the memory policy installed (recompute, offload): it runs inside.
  auto inner = model_->model->block_runner;
  model_->model->block_runner = [this, inner](int64_t layer, const torch::Tensor& x, const BlockFn& block) {
    if (!inner) return run_sharded_block(this, layer, x, block);
    BlockFn wrapped = [&inner, layer, &block](const torch::Tensor& input) { return inner(layer, input, block); };
    return run_sharded_block(this, layer, x, wrapped);
  };
  note_peak();
}

FullyShardedModel::~FullyShardedModel() { model_->model->block_runner = nullptr; }

std::vector<ParameterShard*> FullyShardedModel::parameters() {
  std::vector<ParameterShard*> all;
  for (auto& p : root_->parameters()) all.push_back(&p);
  for (auto& block : blocks_)
    for (auto& p : block->parameters()) all.push_back(&p);
  // Model order (embeddings first, head last), as the single-process optimizer sees them.
  std::stable_sort(all.begin(), all.end(), [](const ParameterShard* a, const ParameterShard* b) {
    auto rank = [](const std::string& n) { return n.rfind("model.embed", 0) == 0 ? 0 : n.rfind("model.layers.", 0) == 0 ? 1 : 2; };
    return rank(a->name) < rank(b->name);
  });
  return all;
}

void FullyShardedModel::begin_micro_batch(bool last) {
  last_micro_batch_ = last;
  root_->wait_gather();
  root_->prepare_gradients();
  if (!blocks_.empty()) blocks_.front()->start_gather();
  note_peak();
}

void FullyShardedModel::before_block_forward(int64_t layer) {
  blocks_[layer]->wait_gather();
  if (layer + 1 < static_cast<int64_t>(blocks_.size())) blocks_[layer + 1]->start_gather();
  note_peak();
}

void FullyShardedModel::after_block_forward(int64_t layer) {
  const bool training = torch::GradMode::is_enabled();
  // The last block's backward comes first: keep it gathered rather than free and fetch it again.
  const bool last_block = layer + 1 == static_cast<int64_t>(blocks_.size());
  if (!training || (reshard_after_forward_ && !last_block)) blocks_[layer]->reshard();
}

void FullyShardedModel::before_block_backward(int64_t layer) {
  blocks_[layer]->wait_gather();
  if (layer > 0) blocks_[layer - 1]->start_gather();
  blocks_[layer]->prepare_gradients();
  note_peak();
}

void FullyShardedModel::after_block_backward(int64_t layer) {
  note_peak();
  blocks_[layer]->start_reduce(last_micro_batch_);
  blocks_[layer]->reshard();
}

void FullyShardedModel::end_micro_batch() {
  root_->start_reduce(last_micro_batch_);
  note_peak();
  for (auto& block : blocks_) block->finish_reduce();
  root_->finish_reduce();
  if (!last_micro_batch_) return;
  root_->reshard();
  const double inverse = 1.0 / static_cast<double>(mesh_.data_size());
  root_->shard_grad().mul_(inverse);
  for (auto& block : blocks_) block->shard_grad().mul_(inverse);
}

void FullyShardedModel::zero_grad() {
  root_->zero_shard_grad();
  for (auto& block : blocks_) block->zero_shard_grad();
}

double FullyShardedModel::clip_grad_norm(double max_norm) {
  torch::NoGradGuard no_grad;
  // Shards are disjoint within the sharding group and equal across replicas.
  auto squares = root_->shard_grad().to(torch::kFloat64).square().sum();
  for (auto& block : blocks_) squares.add_(block->shard_grad().to(torch::kFloat64).square().sum());
  mesh_.fsdp->all_reduce_sum(squares).wait();
  const double norm = std::sqrt(squares.item<double>());
  if (max_norm > 0) {
    const double coefficient = max_norm / (norm + 1e-6);
    if (coefficient < 1.0) {
      root_->shard_grad().mul_(coefficient);
      for (auto& block : blocks_) block->shard_grad().mul_(coefficient);
    }
  }
  return norm;
}

void FullyShardedModel::begin_inference() { root_->wait_gather(); }
void FullyShardedModel::end_inference() { root_->reshard(); }

int64_t FullyShardedModel::resident_bytes() const {
  int64_t bytes = root_->resident_bytes();
  for (const auto& block : blocks_) bytes += block->resident_bytes();
  return bytes;
}

void FullyShardedModel::note_peak() { peak_bytes_ = std::max(peak_bytes_, resident_bytes()); }

}  // namespace xtrain::dist
