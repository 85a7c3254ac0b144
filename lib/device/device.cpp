#include "device/device.h"

#include <ATen/Context.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include "util/build_info.h"
#include "device/host_tensor_memory.h"
#include "util/input_error.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>

#ifdef XTRAIN_CUDA
#include <cuda_runtime_api.h>

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace xtrain::util {

bool cuda_compiled() {
#ifdef XTRAIN_CUDA
  return true;
#else
  return false;
#endif
}

std::string cuda_compiled_version() { return XTRAIN_CUDA_VERSION; }

int64_t cuda_device_count() {
#ifdef XTRAIN_CUDA
  // device_count() answers 0, rather than throwing, without a driver or a GPU.
  return static_cast<int64_t>(c10::cuda::device_count());
#else
  return 0;
#endif
}

c10::Device choose_device(DeviceSetting setting, int64_t local_rank) {
  if (setting == DeviceSetting::cpu) return c10::Device(c10::kCPU);
  const int64_t devices = cuda_device_count();
  if (setting == DeviceSetting::automatic && devices == 0) return c10::Device(c10::kCPU);
  if (!cuda_compiled())
    throw InputError("train.device: cuda, but this xtrain was built without the CUDA paths (LibTorch without "
                     "CUDA, or -DXTRAIN_CUDA=OFF); set train.device: cpu or rebuild with a CUDA LibTorch");
  if (devices == 0)
    throw InputError("train.device: cuda, but no CUDA device is visible (check CUDA_VISIBLE_DEVICES and the "
                     "driver, `xtrain env` tells); set train.device: cpu to train on the CPU");
  const auto index = static_cast<c10::DeviceIndex>(local_rank % devices);
#ifdef XTRAIN_CUDA
  c10::cuda::set_device(index);
#endif
  return c10::Device(c10::kCUDA, index);
}

std::string describe_runtime() {
  std::string cuda = cuda_compiled() ? fmt::format("CUDA {} compiled", cuda_compiled_version()) : "CUDA not compiled";
  const int64_t devices = cuda_device_count();
  if (!cuda_compiled()) return fmt::format("LibTorch {}, {}", TORCH_VERSION, cuda);
  if (devices == 0) return fmt::format("LibTorch {}, {}, no device", TORCH_VERSION, cuda);
  std::string name;
#ifdef XTRAIN_CUDA
  name = at::cuda::getDeviceProperties(0)->name;
#endif
  return fmt::format("LibTorch {}, {}, {} device{} ({})", TORCH_VERSION, cuda, devices, devices == 1 ? "" : "s",
                     name);
}

int64_t peak_device_memory_bytes(const c10::Device& device) {
#ifdef XTRAIN_CUDA
  if (device.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    using c10::CachingAllocator::StatType;
    return stats.allocated_bytes[static_cast<size_t>(StatType::AGGREGATE)].peak;
  }
#endif
  return device.is_cpu() && host_tensor_memory_tracked() ? peak_host_tensor_bytes() : 0;
}

namespace {

// MemAvailable of /proc/meminfo in bytes, -1 when absent.
int64_t mem_available_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    std::istringstream fields(line);
    std::string key;
    int64_t kib = 0;
    if (fields >> key >> kib && key == "MemAvailable:") return kib * 1024;
  }
  return -1;
}

// What the cgroup (v2) still allows: memory.max - memory.current; max when unlimited or absent.
int64_t cgroup_headroom_bytes() {
  std::ifstream max_file("/sys/fs/cgroup/memory.max"), current_file("/sys/fs/cgroup/memory.current");
  std::string max_text;
  int64_t current = 0;
  if (!(max_file >> max_text) || max_text == "max" || !(current_file >> current))
    return std::numeric_limits<int64_t>::max();
  return std::max<int64_t>(0, std::stoll(max_text) - current);
}

}  // namespace

int64_t available_memory_bytes(const c10::Device& device) {
#ifdef XTRAIN_CUDA
  if (device.is_cuda()) {
    size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) return -1;
    return static_cast<int64_t>(free);
  }
#endif
  (void)device;
  const int64_t available = mem_available_bytes();
  return available < 0 ? -1 : std::min(available, cgroup_headroom_bytes());
}

void reset_peak_device_memory(const c10::Device& device) {
#ifdef XTRAIN_CUDA
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
#endif
  if (device.is_cpu()) reset_peak_host_tensor_bytes();
}

at::Tensor device_rng_state(const c10::Device& device) {
  if (!device.is_cuda()) return {};
  return at::globalContext().defaultGenerator(device).get_state();
}

void set_device_rng_state(const c10::Device& device, const at::Tensor& state) {
  if (!device.is_cuda() || !state.defined()) return;
  at::Generator generator = at::globalContext().defaultGenerator(device);  // a handle to the global one
  generator.set_state(state);
}

void synchronize(const c10::Device& device) {
#ifdef XTRAIN_CUDA
  if (device.is_cuda()) c10::cuda::device_synchronize();
#endif
  (void)device;
}

}  // namespace xtrain::util
