// What 1-bit Adam (optim/onebit_adam.h) needs from the data-parallel replicas once its variance
// is frozen: the average over the replicas of each rank's momentum, exchanged compressed, with
// whatever error-feedback state the compression keeps. Declared here, implemented over a Comm
// (parallel/compressed_allreduce.h), so that optim does not depend on parallel.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <torch/types.h>

namespace xtrain::optim {

class MomentumExchange {
 public:
  virtual ~MomentumExchange() = default;
  virtual int64_t replicas() const = 0;
  virtual int64_t replica_rank() const = 0;
  // tensors[i] <- the (compressed) average over the replicas of every rank's tensors[i]; the
  // same call, with tensors of the same sizes, on every replica.
  virtual void average(const std::vector<torch::Tensor>& tensors) = 0;
  // The error-feedback state, named "<kind>.<i>" by tensor index, for checkpoints.
  virtual std::map<std::string, torch::Tensor> state() const = 0;
  virtual void load_state(const std::map<std::string, torch::Tensor>& state) = 0;
};

}  // namespace xtrain::optim
