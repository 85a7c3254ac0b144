#include "memory/recompute.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/torch.h>

namespace xtrain::memory {

namespace {

using torch::autograd::variable_list;

// The backward node of a recomputed region. Its only edges are to the region's inputs; the
// parameters inside are reached by the nested backward over the replayed graph.
class RecomputeBackward : public torch::autograd::Node {
 public:
  RecomputeFn fn;
  std::vector<torch::Tensor> saved;  // detached inputs (empty when offloaded)
  std::vector<bool> needs_grad;
  ActivationOffloader* offloader = nullptr;
  int64_t slot = -1;

  std::string name() const override { return "xtrain::RecomputeBackward"; }

  variable_list apply(variable_list&& grad_outputs) override {
    std::vector<torch::Tensor> inputs =
        offloader ? std::vector<torch::Tensor>{offloader->fetch(slot)} : std::move(saved);
    saved.clear();
    for (size_t i = 0; i < inputs.size(); ++i) inputs[i] = inputs[i].detach().requires_grad_(needs_grad[i]);
    torch::Tensor output;
    {
      torch::AutoGradMode enable_grad(true);
      output = fn(inputs);
    }
    if (output.requires_grad()) torch::autograd::backward({output}, {grad_outputs[0]});
    variable_list grads;
    for (size_t i = 0; i < inputs.size(); ++i) grads.push_back(needs_grad[i] ? inputs[i].grad() : torch::Tensor());
    return grads;
  }
};

}  // namespace

torch::Tensor recompute(RecomputeFn fn, const std::vector<torch::Tensor>& inputs, ActivationOffloader* offloader) {
  if (!torch::GradMode::is_enabled()) return fn(inputs);
  TORCH_CHECK(!offloader || inputs.size() == 1, "offloaded recompute takes exactly one input");
  torch::Tensor output;
  {
    torch::NoGradGuard no_grad;
    output = fn(inputs);
  }
  auto node = std::shared_ptr<RecomputeBackward>(new RecomputeBackward(), torch::autograd::deleteNode);
  node->set_next_edges(torch::autograd::collect_next_edges(inputs));
  for (const auto& input : inputs) node->needs_grad.push_back(input.requires_grad());
  if (offloader) {
    node->offloader = offloader;
    node->slot = offloader->offload(inputs[0]);
  } else {
    for (const auto& input : inputs) node->saved.push_back(input.detach());
  }
  node->fn = std::move(fn);
  torch::autograd::set_history(output, node);
  return output;
}

}  // namespace xtrain::memory
