#include "parallel/tensor_parallel.h"

#include <functional>
#include <string>

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/torch.h>

namespace xtrain::parallel {
namespace {

using Map = std::function<torch::Tensor(const torch::Tensor&)>;

// A node whose backward is a given map of the output's gradient.
class MappedBackward : public torch::autograd::Node {
 public:
  MappedBackward(std::string name, Map backward) : name_(std::move(name)), backward_(std::move(backward)) {}
  std::string name() const override { return name_; }
  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    return {backward_(grads[0])};
  }

 private:
  std::string name_;
  Map backward_;
};

// forward(x), whose gradient is backward(the output's gradient). Every rank runs both whether or
// not its own input needs a gradient, as the collectives in them need every rank.
torch::Tensor mapped(const torch::Tensor& x, const Map& forward, Map backward, const char* name) {
  auto out = [&] {
    torch::NoGradGuard no_grad;
    return forward(x);
  }();
  if (torch::GradMode::is_enabled() && x.requires_grad()) {
    auto node = std::shared_ptr<MappedBackward>(new MappedBackward(name, std::move(backward)),
                                                torch::autograd::deleteNode);
    node->set_next_edges(torch::autograd::collect_next_edges(x));
    torch::autograd::set_history(out, node);
  }
  return out;
}

torch::Tensor summed(Comm& group, const torch::Tensor& x) {
  auto total = x.clone();
  group.all_reduce_sum(total).wait();
  return total;
}

torch::Tensor own_slice(Comm& group, const torch::Tensor& x) {
  const int64_t part = x.size(-1) / group.size();
  TORCH_CHECK(part * group.size() == x.size(-1), "the last dimension, ", x.size(-1), ", does not split over ",
              group.size(), " tensor-parallel ranks");
  return x.narrow(-1, group.rank() * part, part).contiguous();
}

}  // namespace


torch::Tensor copy_to_tensor_parallel(const std::shared_ptr<Comm>& group, const torch::Tensor& x) {
  return mapped(
      x, [](const torch::Tensor& t) { return t.view_as(t); },
      [group](const torch::Tensor& g) { return summed(*group, g); }, "xtrain::CopyToTensorParallel");
}

torch::Tensor reduce_from_tensor_parallel(const std::shared_ptr<Comm>& group, const torch::Tensor& x) {
  return mapped(
      x, [group](const torch::Tensor& t) { return summed(*group, t); },
      [](const torch::Tensor& g) { return g; }, "xtrain::ReduceFromTensorParallel");
}

torch::Tensor gather_from_tensor_parallel(const std::shared_ptr<Comm>& group, const torch::Tensor& x) {
  return mapped(
      x, [group](const torch::Tensor& t) { return all_gather_along(*group, t, -1); },
      [group](const torch::Tensor& g) { return own_slice(*group, g); }, "xtrain::GatherFromTensorParallel");
}

torch::Tensor scatter_to_tensor_parallel(const std::shared_ptr<Comm>& group, const torch::Tensor& x) {
  return mapped(
      x, [group](const torch::Tensor& t) { return own_slice(*group, t); },
      [group](const torch::Tensor& g) { return all_gather_along(*group, g, -1); }, "xtrain::ScatterToTensorParallel");
}

torch::Tensor gather_sequence(const std::shared_ptr<Comm>& group, const torch::Tensor& x, int64_t dim) {
  return mapped(
      x, [group, dim](const torch::Tensor& t) { return all_gather_along(*group, t, dim); },
      [group, dim](const torch::Tensor& g) { return reduce_scatter_along(*group, g, dim); }, "xtrain::GatherSequence");
}

torch::Tensor reduce_scatter_sequence(const std::shared_ptr<Comm>& group, const torch::Tensor& x, int64_t dim) {
  return mapped(
      x, [group, dim](const torch::Tensor& t) { return reduce_scatter_along(*group, t, dim); },
      [group, dim](const torch::Tensor& g) { return all_gather_along(*group, g, dim); }, "xtrain::ReduceScatterSequence");
}

torch::Tensor gather_replicated_sequence(const std::shared_ptr<Comm>& group, const torch::Tensor& x, int64_t dim) {
  const int64_t part = x.size(dim);
  return mapped(
      x, [group, dim](const torch::Tensor& t) { return all_gather_along(*group, t, dim); },
      [group, dim, part](const torch::Tensor& g) { return g.narrow(dim, group->rank() * part, part).contiguous(); },
      "xtrain::GatherReplicatedSequence");
}

torch::Tensor column_parallel_linear(const std::shared_ptr<Comm>& group, const torch::Tensor& x,
                                     const torch::Tensor& weight, bool gather_output, int64_t sequence_dim) {
  const auto input = sequence_dim >= 0 ? gather_sequence(group, x, sequence_dim) : copy_to_tensor_parallel(group, x);
  const auto y = torch::nn::functional::linear(input, weight);
  return gather_output ? gather_from_tensor_parallel(group, y) : y;
}

torch::Tensor row_parallel_linear(const std::shared_ptr<Comm>& group, const torch::Tensor& x,
                                  const torch::Tensor& weight, int64_t sequence_dim) {
  const auto partial = torch::nn::functional::linear(x, weight);
  return sequence_dim >= 0 ? reduce_scatter_sequence(group, partial, sequence_dim)
                           : reduce_from_tensor_parallel(group, partial);
}

}  // namespace xtrain::parallel
