#include "parallel/sharded_unit_node.h"

#include <string>

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/torch.h>

namespace xtrain::parallel {
namespace {

using torch::autograd::variable_list;

// Forward kept the inner graph (from the detached input to the output); backward runs it
// between the hooks.
class ShardedUnitBackward : public torch::autograd::Node {
 public:
  UnitHooks hooks;
  torch::Tensor inner_input, inner_output;

  std::string name() const override { return "xtrain::ShardedUnitBackward"; }

  variable_list apply(variable_list&& grad_outputs) override {
    hooks.before_backward();
    // A unit whose parameters are all frozen (model.freeze), on an input without gradient, has
    // nothing to differentiate; its hooks still run, so every rank takes the same collectives.
    if (inner_output.requires_grad()) torch::autograd::backward({inner_output}, {grad_outputs[0]});
    hooks.after_backward();
    // Undefined for ids, which need none, and for a unit without input.
    auto grad = inner_input.defined() ? inner_input.grad() : torch::Tensor();
    inner_input = inner_output = torch::Tensor();
    return {grad};
  }
};

}  // namespace

torch::Tensor run_sharded_unit(const UnitHooks& hooks, const torch::Tensor& x, const UnitFn& fn) {
  if (!torch::GradMode::is_enabled()) {
    hooks.before_forward();
    auto out = fn(x);
    hooks.after_forward();
    return out;
  }
  auto node = std::shared_ptr<ShardedUnitBackward>(new ShardedUnitBackward(), torch::autograd::deleteNode);
  node->hooks = hooks;
  if (x.defined()) {
    node->inner_input = x.detach();
    if (x.requires_grad()) node->inner_input.requires_grad_(true);
  }
  hooks.before_forward();
  node->inner_output = fn(node->inner_input);
  hooks.after_forward();
  auto output = node->inner_output.detach();
  node->set_next_edges(torch::autograd::collect_next_edges(x));  // an empty edge for no input
  torch::autograd::set_history(output, node);
  return output;
}

}  // namespace xtrain::parallel
