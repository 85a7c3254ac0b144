#include "memory/activation_offload.h"

#include <fmt/format.h>
#include <torch/torch.h>

namespace xtrain::memory {

void ActivationOffloader::begin_forward() {
  host_.clear();
  prefetched_.clear();
  devices_.clear();
  next_slot_ = 0;
  events_.clear();
}

int64_t ActivationOffloader::offload(const torch::Tensor& tensor) {
  const int64_t slot = next_slot_++;
  devices_.emplace(slot, tensor.device());
  auto options = tensor.options().device(torch::kCPU).pinned_memory(tensor.is_cuda());
  auto host = torch::empty(tensor.sizes(), options);
  host.copy_(tensor, /*non_blocking=*/tensor.is_cuda());
  host_[slot] = host;
  events_.push_back(fmt::format("offload {}", slot));
  return slot;
}

void ActivationOffloader::prefetch(int64_t slot) {
  auto it = host_.find(slot);
  if (it == host_.end() || prefetched_.count(slot)) return;
  const torch::Device device = devices_.at(slot);
  auto copy = torch::empty(it->second.sizes(), it->second.options().device(device).pinned_memory(false));
  copy.copy_(it->second, /*non_blocking=*/device.is_cuda());
  prefetched_[slot] = copy;
  events_.push_back(fmt::format("prefetch {}", slot));
}

torch::Tensor ActivationOffloader::fetch(int64_t slot) {
  prefetch(slot);  // no-op when it was brought back ahead of time
  TORCH_CHECK(prefetched_.count(slot), "activation slot ", slot, " was never offloaded or was already fetched");
  torch::Tensor tensor = prefetched_.at(slot);
  prefetched_.erase(slot);
  events_.push_back(fmt::format("fetch {}", slot));
  host_.erase(slot);
  events_.push_back(fmt::format("release {}", slot));
  prefetch(slot - 1);
  return tensor;
}

}  // namespace xtrain::memory
