// ActivationOffloader: keeps the tensors that recompute needs (each block's input) in host
// memory between forward and backward, so device memory holds only the blocks in flight.
// Forward offloads slot 0, 1, 2, ...; backward fetches them in reverse and, while block i
// runs its backward, the copy of slot i-1 back to the device is already under way
// (prefetch one block ahead). A slot's host copy is freed as soon as it is fetched.
// On CUDA the copies use pinned host memory and a side stream, ordered against the compute
// stream by events; on the CPU the same protocol runs with host-to-host copies, which keeps
// ordering, prefetch and freeing testable anywhere.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

namespace xtrain::memory {

class ActivationOffloader {
 public:
  ActivationOffloader();
  ~ActivationOffloader();

  // Called at the start of each forward pass: forgets any slot of an earlier pass.
  void begin_forward();
  // Copies the tensor to host memory and returns its slot. The caller drops its own reference
  // so that the device copy can be freed.
  int64_t offload(const torch::Tensor& tensor);
  // The tensor of `slot` back on its device; starts bringing back slot - 1 ahead of need.
  torch::Tensor fetch(int64_t slot);

  // Slots whose host copy is still held.
  int64_t resident_slots() const { return static_cast<int64_t>(host_.size()); }
  // What happened, in order: "offload 3", "prefetch 2", "fetch 3", "release 3", ...
  const std::vector<std::string>& events() const { return events_; }

 private:
  void prefetch(int64_t slot);
  struct CopyStream;

  std::unique_ptr<CopyStream> copies_;

  std::map<int64_t, torch::Tensor> host_;      // slot -> host copy
  std::map<int64_t, torch::Tensor> prefetched_;  // slot -> device copy brought back early
  std::map<int64_t, torch::Device> devices_;
  int64_t next_slot_ = 0;
  std::vector<std::string> events_;
};

}  // namespace xtrain::memory
