// The compute device of this process and what is known about it: which device a setting and a
// LOCAL_RANK choose, whether CUDA was compiled in and is present, and the device-side state a
// run reports (peak memory) or checkpoints (the device RNG). Everything here also builds and
// answers without CUDA: a CPU build reports "not compiled", a CPU device has no peak or RNG.
#pragma once
#include <cstdint>
#include <string>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "util/device_setting.h"

namespace xtrain::util {

// Whether this binary carries the CUDA paths, and the toolkit version they were built with.
bool cuda_compiled();
std::string cuda_compiled_version();
// CUDA devices visible to this process (0 without CUDA, a driver or a GPU).
int64_t cuda_device_count();

// The device for setting auto | cpu | cuda. cuda takes device LOCAL_RANK modulo the visible
// devices; it throws InputError naming train.device when CUDA is not compiled in or no device is
// visible. The chosen CUDA device becomes the current one.
c10::Device choose_device(DeviceSetting setting, int64_t local_rank);

// "LibTorch 2.11.0, CUDA 13.0 compiled, 1 device (NVIDIA H200)" and the like.
std::string describe_runtime();

// The peak bytes of tensor storage on the device since the last reset, and the reset: CUDA's
// caching allocator's, or on the CPU the counting allocator's (device/host_tensor_memory.h; 0 when
// it is not installed).
int64_t peak_device_memory_bytes(const c10::Device& device);
void reset_peak_device_memory(const c10::Device& device);

// Bytes this process could still allocate on the device: the driver's free memory on CUDA; on the
// CPU, /proc/meminfo's MemAvailable, or less where the cgroup's memory.max says so. -1 when unknown.
int64_t available_memory_bytes(const c10::Device& device);

// The device generator's state, uint8 on the host (undefined on CPU), and restoring it.
at::Tensor device_rng_state(const c10::Device& device);
void set_device_rng_state(const c10::Device& device, const at::Tensor& state);

// Waits for the device's queued work (no-op on CPU): for timing only.
void synchronize(const c10::Device& device);

}  // namespace xtrain::util
