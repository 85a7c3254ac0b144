// Collectives that autograd sees through: their backward is the conjugate collective, so a
// model's forward can move activations between ranks and still get the right gradients.
//   all_to_all_rows: rows to and from every rank with per-rank splits; backward sends the
//                    gradients back the way the rows came (the reverse all-to-all); also
//                    started without waiting (start_all_to_all_rows).
// Tensor and sequence parallelism have theirs in parallel/tensor_parallel.h.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include <torch/types.h>

#include "parallel/comm.h"

namespace xtrain::parallel {

// x's rows, split by send_splits[r] to rank r, and the rows of every rank for this one, split by
// recv_splits[r] from rank r (zero allowed: a rank may send or receive nothing).
torch::Tensor all_to_all_rows(const std::shared_ptr<Comm>& comm, const torch::Tensor& x,
                              const std::vector<int64_t>& send_splits, const std::vector<int64_t>& recv_splits);

// The same exchange, started: `rows` has its shape and autograd history at once and its values
// once `pending.wait()` returns, so that compute can run meanwhile.
//
// Backward overlaps too. The reverse exchange is two autograd nodes: one starts it as soon as
// the gradient of `rows` is known (ordered before any ordinary node), the other waits for it
// only when the gradient of `x` is due (ordered as the node that made `x`). Autograd's ready
// queue runs the work in between, such as another part's expert backward, meanwhile. Every
// rank's graph is the same, so the exchanges start in the same order everywhere.
// `backward_clock`, when given, counts backward's time blocked.
struct StartedRows {
  torch::Tensor rows;
  PendingCollective pending;
};
StartedRows start_all_to_all_rows(const std::shared_ptr<Comm>& comm, const torch::Tensor& x,
                                  const std::vector<int64_t>& send_splits, const std::vector<int64_t>& recv_splits,
                                  BlockedClock* backward_clock = nullptr);

}  // namespace xtrain::parallel
