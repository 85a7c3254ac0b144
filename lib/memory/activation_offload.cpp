#include "memory/activation_offload.h"

#include <fmt/format.h>
#include <torch/torch.h>

#ifdef XTRAIN_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace xtrain::memory {

// Copies between a device tensor and pinned host memory. On CUDA they run on a side stream:
// ordered after the compute stream's work so far, and the compute stream waits for a copy only
// when it needs the result, so offloads and prefetches overlap the blocks' compute. Elsewhere a
// copy is an ordinary synchronous one.
struct ActivationOffloader::CopyStream {
#ifdef XTRAIN_CUDA
  std::optional<c10::cuda::CUDAStream> side;
  std::map<int64_t, std::shared_ptr<at::cuda::CUDAEvent>> done;  // slot -> its last copy's event

  // The copy of `from` into `to` on the side stream, after what the compute stream has queued.
  void copy(int64_t slot, torch::Tensor& to, const torch::Tensor& from, const torch::Device& device) {
    if (!device.is_cuda()) {
      to.copy_(from);
      return;
    }
    if (!side) side = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index());
    const auto compute = c10::cuda::getCurrentCUDAStream(device.index());
    at::cuda::CUDAEvent ready;
    ready.record(compute);
    ready.block(*side);
    if (auto it = done.find(slot); it != done.end()) it->second->block(*side);  // the host copy is complete
    {
      c10::cuda::CUDAStreamGuard guard(*side);
      to.copy_(from, /*non_blocking=*/true);
    }
    // Neither buffer may be reused by the allocator before the side stream is done with it.
    for (const torch::Tensor* t : {static_cast<const torch::Tensor*>(&to), &from})
      if (t->is_cuda()) c10::cuda::CUDACachingAllocator::recordStream(t->storage().data_ptr(), *side);
    auto event = std::make_shared<at::cuda::CUDAEvent>();
    event->record(*side);
    done[slot] = event;
  }
  // The compute stream waits for the slot's copy.
  void wait(int64_t slot, const torch::Device& device) {
    if (!device.is_cuda()) return;
    if (auto it = done.find(slot); it != done.end()) {
      it->second->block(c10::cuda::getCurrentCUDAStream(device.index()));
      done.erase(it);
    }
  }
#else
  void copy(int64_t, torch::Tensor& to, const torch::Tensor& from, const torch::Device&) { to.copy_(from); }
  void wait(int64_t, const torch::Device&) {}
#endif
};

ActivationOffloader::ActivationOffloader() : copies_(std::make_unique<CopyStream>()) {}
ActivationOffloader::~ActivationOffloader() = default;

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
  copies_->copy(slot, host, tensor, tensor.device());
  host_[slot] = host;
  events_.push_back(fmt::format("offload {}", slot));
  return slot;
}

void ActivationOffloader::prefetch(int64_t slot) {
  auto it = host_.find(slot);
  if (it == host_.end() || prefetched_.count(slot)) return;
  const torch::Device device = devices_.at(slot);
  auto copy = torch::empty(it->second.sizes(), it->second.options().device(device).pinned_memory(false));
  copies_->copy(slot, copy, it->second, device);
  prefetched_[slot] = copy;
  events_.push_back(fmt::format("prefetch {}", slot));
}

torch::Tensor ActivationOffloader::fetch(int64_t slot) {
  prefetch(slot);  // no-op when it was brought back ahead of time
  TORCH_CHECK(prefetched_.count(slot), "activation slot ", slot, " was never offloaded or was already fetched");
  torch::Tensor tensor = prefetched_.at(slot);
  copies_->wait(slot, devices_.at(slot));
  prefetched_.erase(slot);
  events_.push_back(fmt::format("fetch {}", slot));
  host_.erase(slot);  // the side stream's use of it is recorded: its pinned block is reused only after the copy
  events_.push_back(fmt::format("release {}", slot));
  prefetch(slot - 1);
  return tensor;
}

}  // namespace xtrain::memory
