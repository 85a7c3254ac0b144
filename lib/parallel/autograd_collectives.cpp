#include "parallel/autograd_collectives.h"

#include <numeric>

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/torch.h>

namespace xtrain::parallel {
namespace {

StartedRows start_exchange(Comm& comm, const torch::Tensor& x, const std::vector<int64_t>& send_splits,
                           const std::vector<int64_t>& recv_splits) {
  const int64_t rows = std::accumulate(recv_splits.begin(), recv_splits.end(), int64_t{0});
  auto sizes = x.sizes().vec();
  sizes[0] = rows;
  auto out = torch::empty(sizes, x.options());
  return {out, comm.all_to_all(out, x.contiguous(), recv_splits, send_splits)};
}

torch::Tensor exchange(Comm& comm, const torch::Tensor& x, const std::vector<int64_t>& send_splits,
                       const std::vector<int64_t>& recv_splits) {
  auto started = start_exchange(comm, x, send_splits, recv_splits);
  started.pending.wait();
  return started.rows;
}

class AllToAllRowsBackward : public torch::autograd::Node {
 public:
  AllToAllRowsBackward(std::shared_ptr<Comm> comm, std::vector<int64_t> send_splits, std::vector<int64_t> recv_splits)
      : comm_(std::move(comm)), send_splits_(std::move(send_splits)), recv_splits_(std::move(recv_splits)) {}
  std::string name() const override { return "xtrain::AllToAllRowsBackward"; }

  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    // Every rank takes part, whether or not its own output needs a gradient.
    return {exchange(*comm_, grads[0], recv_splits_, send_splits_)};
  }

 private:
  std::shared_ptr<Comm> comm_;
  std::vector<int64_t> send_splits_, recv_splits_;
};

}  // namespace

StartedRows start_all_to_all_rows(const std::shared_ptr<Comm>& comm, const torch::Tensor& x,
                                  const std::vector<int64_t>& send_splits, const std::vector<int64_t>& recv_splits) {
  auto started = [&] {
    torch::NoGradGuard no_grad;
    return start_exchange(*comm, x, send_splits, recv_splits);
  }();
  if (torch::GradMode::is_enabled() && x.requires_grad()) {
    auto node = std::shared_ptr<AllToAllRowsBackward>(new AllToAllRowsBackward(comm, send_splits, recv_splits),
                                                      torch::autograd::deleteNode);
    node->set_next_edges(torch::autograd::collect_next_edges(x));
    torch::autograd::set_history(started.rows, node);
  }
  return started;
}

torch::Tensor all_to_all_rows(const std::shared_ptr<Comm>& comm, const torch::Tensor& x,
                              const std::vector<int64_t>& send_splits, const std::vector<int64_t>& recv_splits) {
  auto started = start_all_to_all_rows(comm, x, send_splits, recv_splits);
  started.pending.wait();
  return started.rows;
}

}  // namespace xtrain::parallel
