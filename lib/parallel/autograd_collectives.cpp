#include "parallel/autograd_collectives.h"

#include <chrono>
#include <limits>
#include <numeric>

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/torch.h>

namespace xtrain::parallel {
namespace {

using torch::autograd::variable_list;

StartedRows start_exchange(Comm& comm, const torch::Tensor& x, const std::vector<int64_t>& send_splits,
                           const std::vector<int64_t>& recv_splits) {
  const int64_t rows = std::accumulate(recv_splits.begin(), recv_splits.end(), int64_t{0});
  auto sizes = x.sizes().vec();
  sizes[0] = rows;
  auto out = torch::empty(sizes, x.options());
  return {out, comm.all_to_all(out, x.contiguous(), recv_splits, send_splits)};
}

// The gradients' way back, shared by the node that starts it and the node that waits for it.
struct ReverseExchange {
  std::shared_ptr<Comm> comm;
  std::vector<int64_t> send_splits, recv_splits;  // of the forward exchange
  std::vector<int64_t> rows_shape;                // of the forward's output
  torch::TensorOptions options;
  BlockedClock* clock = nullptr;
  StartedRows in_flight;
};

// Above every ordinary node (whose numbers count forward operations), below AccumulateGrad's
// maximum; the forward's own number keeps these nodes in forward order among themselves.
constexpr uint64_t kStartFirst = uint64_t{1} << 62;

class StartReverseExchange : public torch::autograd::Node {
 public:
  explicit StartReverseExchange(std::shared_ptr<ReverseExchange> exchange)
      : Node(kStartFirst + at::sequence_number::get_and_increment()), exchange_(std::move(exchange)) {}
  std::string name() const override { return "xtrain::StartReverseAllToAll"; }

  variable_list apply(variable_list&& grads) override {
    auto& ex = *exchange_;
    // Every rank takes part, whether or not its own output needs a gradient.
    const auto grad = grads[0].defined() ? grads[0] : torch::zeros(ex.rows_shape, ex.options);
    ex.in_flight = start_exchange(*ex.comm, grad, ex.recv_splits, ex.send_splits);
    return {ex.in_flight.rows};
  }

 private:
  std::shared_ptr<ReverseExchange> exchange_;
};

class AwaitReverseExchange : public torch::autograd::Node {
 public:
  AwaitReverseExchange(uint64_t sequence_nr, std::shared_ptr<ReverseExchange> exchange)
      : Node(sequence_nr), exchange_(std::move(exchange)) {}
  std::string name() const override { return "xtrain::AwaitReverseAllToAll"; }

  variable_list apply(variable_list&& grads) override {
    auto& ex = *exchange_;
    if (ex.clock)
      ex.clock->wait(ex.in_flight.pending);
    else
      ex.in_flight.pending.wait();
    return {std::move(grads[0])};
  }

 private:
  std::shared_ptr<ReverseExchange> exchange_;
};

// x -> AwaitReverseExchange -> StartReverseExchange -> rows, in backward's terms.
void record_history(StartedRows& started, const torch::Tensor& x, std::shared_ptr<ReverseExchange> exchange) {
  using torch::autograd::deleteNode;
  const uint64_t due = x.grad_fn() ? x.grad_fn()->sequence_nr() : at::sequence_number::peek();
  auto await = std::shared_ptr<AwaitReverseExchange>(new AwaitReverseExchange(due, exchange), deleteNode);
  await->set_next_edges(torch::autograd::collect_next_edges(x));
  auto start = std::shared_ptr<StartReverseExchange>(new StartReverseExchange(std::move(exchange)), deleteNode);
  start->add_next_edge({await, await->add_input_metadata(x)});
  torch::autograd::set_history(started.rows, start);
}

}  // namespace

StartedRows start_all_to_all_rows(const std::shared_ptr<Comm>& comm, const torch::Tensor& x,
                                  const std::vector<int64_t>& send_splits, const std::vector<int64_t>& recv_splits,
                                  BlockedClock* backward_clock) {
  auto started = [&] {
    torch::NoGradGuard no_grad;
    return start_exchange(*comm, x, send_splits, recv_splits);
  }();
  if (torch::GradMode::is_enabled() && x.requires_grad()) {
    auto exchange = std::make_shared<ReverseExchange>();
    *exchange = {comm, send_splits, recv_splits, started.rows.sizes().vec(), started.rows.options(), backward_clock, {}};
    record_history(started, x, std::move(exchange));
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
