#include "parallel/tensor_parallel_plan.h"

#include <map>
#include <string>

#include <torch/torch.h>

#include "model/layers/parameter_source.h"
#include "parallel/tensor_parallel.h"

namespace xtrain::parallel {
namespace {

constexpr int64_t kSequenceDim = 1;  // activations are [batch, sequence, hidden]

class TensorParallelGroup final : public model::TensorParallelOps {
 public:
  TensorParallelGroup(std::shared_ptr<Comm> group, bool sequence_parallel)
      : group_(std::move(group)), sequence_parallel_(sequence_parallel) {}

  int64_t rank() const override { return group_->rank(); }
  int64_t size() const override { return group_->size(); }
  bool sequence_parallel() const override { return sequence_parallel_; }

  torch::Tensor enter(const torch::Tensor& x) override {
    return sequence_parallel_ ? gather_sequence(group_, x, kSequenceDim) : copy_to_tensor_parallel(group_, x);
  }
  torch::Tensor leave(const torch::Tensor& y) override {
    return sequence_parallel_ ? reduce_scatter_sequence(group_, y, kSequenceDim)
                              : reduce_from_tensor_parallel(group_, y);
  }
  torch::Tensor shared(const torch::Tensor& w) override { return copy_to_tensor_parallel(group_, w); }
  torch::Tensor whole(const torch::Tensor& x) override {
    return sequence_parallel_ ? gather_replicated_sequence(group_, x, kSequenceDim) : x;
  }

  void all_reduce_sum(torch::Tensor& t) override {
    group_->all_reduce_sum(t).wait();
  }
  void all_reduce_max(torch::Tensor& t) override {
    auto all = torch::empty({group_->size() * t.numel()}, t.options());
    group_->all_gather(all, t.contiguous().view(-1)).wait();
    t.copy_(std::get<0>(all.view({group_->size(), t.numel()}).max(0)).view_as(t));
  }
  torch::Tensor gather_last_dim(const torch::Tensor& x, const std::vector<int64_t>& sizes) override {
    // The shares may differ by one row (a vocabulary that does not divide): gathered padded.
    const int64_t widest = *std::max_element(sizes.begin(), sizes.end());
    auto padded = torch::nn::functional::pad(x, torch::nn::functional::PadFuncOptions({0, widest - x.size(-1)}));
    const auto all = all_gather_along(*group_, padded, -1);
    std::vector<torch::Tensor> parts;
    for (size_t r = 0; r < sizes.size(); ++r) parts.push_back(all.narrow(-1, static_cast<int64_t>(r) * widest, sizes[r]));
    return torch::cat(parts, -1);
  }

 private:
  std::shared_ptr<Comm> group_;
  bool sequence_parallel_;
};

// The parameter narrowed to its slice: materialised values keep theirs, a stand-in stays one.
void take_slice(torch::Tensor& parameter, const model::TensorSlice& slice) {
  auto mine = parameter.narrow(slice.dim, slice.share.first, slice.share.count);
  if (model::is_materialized(parameter))
    parameter.set_data(mine.contiguous());
  else
    parameter.set_data(torch::zeros({1}, parameter.options()).expand(mine.sizes()));
}

}  // namespace

std::shared_ptr<model::TensorParallelOps> make_tensor_parallel_ops(std::shared_ptr<Comm> group,
                                                                   bool sequence_parallel) {
  return std::make_shared<TensorParallelGroup>(std::move(group), sequence_parallel);
}

model::ShardPlan apply_tensor_parallel(model::CausalLM& model, const DeviceMesh& mesh, model::ShardPlan plan,
                                       bool sequence_parallel) {
  const auto& group = mesh.group(Dim::tp);
  const auto slices = model.tensor_parallel_plan(group->rank(), group->size());
  std::map<std::string, model::Placement> placements;
  {
    torch::NoGradGuard no_grad;
    for (auto& item : model.named_parameters()) {
      auto parameter = item.value();
      model::Placement placement{parameter.sizes().vec(), std::vector<int64_t>(parameter.dim(), 0), group->size()};
      if (const auto slice = slices.find(item.key()); slice != slices.end()) {
        placement.offsets[static_cast<size_t>(slice->second.dim)] = slice->second.share.first;
        placement.copies = 1;
        take_slice(parameter, slice->second);  // in place: the plan's tensors are the slices now
      }
      placements[item.key()] = std::move(placement);
    }
  }
  model.use_tensor_parallel(make_tensor_parallel_ops(group, sequence_parallel));
  auto place = [&placements](model::ShardPlan::Unit& unit) {
    for (const auto& [name, tensor] : unit.parameters) unit.placements[name] = placements.at(name);
  };
  if (plan.embedding) place(*plan.embedding);
  for (auto& block : plan.blocks)
    for (auto& unit : block) place(unit);
  place(plan.head);
  return plan;
}

}  // namespace xtrain::parallel
