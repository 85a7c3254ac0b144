// Expert parallelism's token dispatch (model::TokenDispatcher) over an "ep" group of P ranks,
// rank p holding experts [p E/P, (p + 1) E/P). In stages, as XTuner's dispatchers:
//   dispatch: the rows' counts per expert are exchanged first (an all-to-all of E numbers), then
//             the rows themselves go to their experts' ranks (all-to-all with those splits) and
//             are regrouped by local expert;
//   combine:  the outputs are put back in arrival order and return the way they came.
// Both row exchanges are autograd-aware (parallel/autograd_collectives.h): backward sends the
// gradients back along the reverse path, overlapped as the forward's are. A rank may send or
// receive no rows at all.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "model/layers/moe.h"
#include "parallel/comm.h"

namespace xtrain::parallel {

class ExpertDispatcher final : public model::TokenDispatcher {
 public:
  // micro_batches: parallel.intra_layer_micro_batch (Domino-EP), see model::TokenDispatcher.
  ExpertDispatcher(std::shared_ptr<Comm> ep_group, int64_t num_experts, int64_t micro_batches = 1);

  int64_t first_expert() const { return group_->rank() * local_experts_; }
  int64_t local_experts() const { return local_experts_; }
  int64_t micro_batches() const override { return micro_batches_; }

  Dispatched start_dispatch(const torch::Tensor& rows, const std::vector<int64_t>& counts) override;
  void finish_dispatch(Dispatched& dispatched) override;
  void start_combine(const torch::Tensor& outputs, Dispatched& dispatched) override;
  torch::Tensor finish_combine(Dispatched& dispatched) override;

  // Seconds this process has spent blocked on expert exchanges, the all-to-all time that compute
  // did not hide: in forward (the counts, and the rows both ways), and in backward (the rows'
  // gradients both ways).
  double forward_blocked_seconds() const { return forward_blocked_.seconds(); }
  double backward_blocked_seconds() const { return backward_blocked_.seconds(); }
  int64_t blocked_waits() const { return forward_blocked_.waits() + backward_blocked_.waits(); }

 private:
  std::shared_ptr<Comm> group_;
  int64_t num_experts_, local_experts_, micro_batches_;
  BlockedClock forward_blocked_, backward_blocked_;
};

// Expert parallelism on a block: `dispatcher` installed, and the experts' weights narrowed to
// this rank's experts (materialised weights keep those values, stand-ins get the local shape).
void shard_experts(model::MoeBlockImpl& block, const std::shared_ptr<ExpertDispatcher>& dispatcher);

}  // namespace xtrain::parallel
