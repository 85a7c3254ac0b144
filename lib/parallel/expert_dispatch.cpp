#include "parallel/expert_dispatch.h"

#include <numeric>

#include <torch/torch.h>

#include "model/layers/parameter_source.h"
#include "parallel/autograd_collectives.h"

namespace xtrain::parallel {
namespace {

// An exchange in flight and the way back.
struct Route {
  std::vector<int64_t> send_splits, recv_splits;
  torch::Tensor by_expert;  // arrival row of each row in local-expert order
  StartedRows in_flight;    // the rows coming, then the outputs going back
};

}  // namespace

ExpertDispatcher::ExpertDispatcher(std::shared_ptr<Comm> ep_group, int64_t num_experts, int64_t micro_batches)
    : group_(std::move(ep_group)),
      num_experts_(num_experts),
      local_experts_(num_experts / group_->size()),
      micro_batches_(micro_batches) {
  TORCH_CHECK(num_experts % group_->size() == 0, num_experts, " experts do not split over ", group_->size(),
              " expert-parallel ranks");
  TORCH_CHECK(micro_batches >= 1, "micro_batches must be at least 1");
}

model::TokenDispatcher::Dispatched ExpertDispatcher::start_dispatch(const torch::Tensor& rows,
                                                                    const std::vector<int64_t>& counts) {
  const int64_t ranks = group_->size(), local = local_experts_;
  TORCH_CHECK(static_cast<int64_t>(counts.size()) == num_experts_, "dispatch: ", counts.size(), " counts for ",
              num_experts_, " experts");
  // Rank q receives counts[q L, (q + 1) L); this rank gets every rank's counts for its experts.
  auto sent_counts = torch::tensor(counts, torch::kInt64);
  auto received_counts = torch::empty({ranks * local}, torch::kInt64);
  auto counts_exchange = group_->all_to_all(received_counts, sent_counts, {}, {});
  forward_blocked_.wait(counts_exchange);
  const auto* from = received_counts.data_ptr<int64_t>();  // [source rank][local expert]
  auto route = std::make_shared<Route>();
  for (int64_t q = 0; q < ranks; ++q) {
    route->send_splits.push_back(std::accumulate(counts.begin() + q * local, counts.begin() + (q + 1) * local, int64_t{0}));
    route->recv_splits.push_back(std::accumulate(from + q * local, from + (q + 1) * local, int64_t{0}));
  }
  route->in_flight = start_all_to_all_rows(group_, rows, route->send_splits, route->recv_splits, &backward_blocked_);
  // Arrival order is by source rank, then expert; the experts want their rows together.
  std::vector<int64_t> source_start(static_cast<size_t>(ranks), 0), order;
  for (int64_t q = 1; q < ranks; ++q) source_start[q] = source_start[q - 1] + route->recv_splits[q - 1];
  Dispatched dispatched;
  dispatched.local_counts.assign(static_cast<size_t>(local), 0);
  for (int64_t e = 0; e < local; ++e)
    for (int64_t q = 0; q < ranks; ++q) {
      const int64_t start = source_start[q] + std::accumulate(from + q * local, from + q * local + e, int64_t{0});
      for (int64_t i = 0; i < from[q * local + e]; ++i) order.push_back(start + i);
      dispatched.local_counts[e] += from[q * local + e];
    }
  route->by_expert = torch::tensor(order, torch::kInt64).to(rows.device());
  dispatched.state = route;
  return dispatched;
}

void ExpertDispatcher::finish_dispatch(Dispatched& dispatched) {
  auto& route = *std::static_pointer_cast<Route>(dispatched.state);
  forward_blocked_.wait(route.in_flight.pending);
  dispatched.rows = route.in_flight.rows.index_select(0, route.by_expert);
}

void ExpertDispatcher::start_combine(const torch::Tensor& outputs, Dispatched& dispatched) {
  auto& route = *std::static_pointer_cast<Route>(dispatched.state);
  const auto in_arrival_order = torch::zeros_like(outputs).index_copy(0, route.by_expert, outputs);
  route.in_flight =
      start_all_to_all_rows(group_, in_arrival_order, route.recv_splits, route.send_splits, &backward_blocked_);
}

torch::Tensor ExpertDispatcher::finish_combine(Dispatched& dispatched) {
  auto& route = *std::static_pointer_cast<Route>(dispatched.state);
  forward_blocked_.wait(route.in_flight.pending);
  return route.in_flight.rows;
}

void shard_experts(model::MoeBlockImpl& block, const std::shared_ptr<ExpertDispatcher>& dispatcher) {
  torch::NoGradGuard no_grad;
  for (auto& [name, weight] : block.expert_weights()) {
    auto mine = weight.narrow(0, dispatcher->first_expert(), dispatcher->local_experts());
    if (model::is_materialized(weight))
      weight.set_data(mine.clone());
    else  // a stand-in stays one: whoever materialises the model fills this rank's experts only
      weight.set_data(torch::zeros({1}, weight.options()).expand(mine.sizes()));
  }
  block.set_dispatcher(dispatcher);
}

}  // namespace xtrain::parallel
