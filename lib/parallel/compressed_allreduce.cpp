#include "parallel/compressed_allreduce.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "util/input_error.h"

namespace xtrain::parallel {
namespace {

torch::Tensor bit_weights(const torch::Device& device) {
  return torch::tensor({128, 64, 32, 16, 8, 4, 2, 1}, torch::TensorOptions().dtype(torch::kUInt8).device(device));
}

// sign(x) with zero counted positive, as +1 / -1 (DeepSpeed's sign().add_(1).bool() * 2 - 1).
torch::Tensor signs_of(const torch::Tensor& x) {
  if (x.device().is_cpu() && x.scalar_type() == torch::kFloat32) return unpack_signs(pack_signs(x));
  return x.ge(0).to(x.scalar_type()).mul_(2.0).sub_(1.0);
}

// ||x|| / sqrt(numel): the scale that keeps the l2 norm of scale * signs equal to x's.
torch::Tensor scale_of(const torch::Tensor& x) {
  return at::linalg_vector_norm(x, 2).div(std::sqrt(static_cast<double>(x.numel())));
}

bool plain_cpu(const torch::Tensor& x) {
  return x.device().is_cpu() && x.scalar_type() == torch::kFloat32 && x.is_contiguous();
}

// error <- x - scale sign(x), and x's signs packed, in one pass over a CPU x (the same float
// arithmetic as the tensor ops: scale * (+-1) is exact, the subtraction rounds once).
torch::Tensor compress(const torch::Tensor& x, const torch::Tensor& scale, torch::Tensor& error) {
  if (!plain_cpu(x) || !plain_cpu(error)) {
    error.copy_(x - scale * signs_of(x));
    return pack_signs(x);
  }
  auto out = torch::empty({x.numel() / 8}, torch::kUInt8);
  const float s = scale.item<float>();
  const float* v = x.data_ptr<float>();
  float* e = error.data_ptr<float>();
  uint8_t* b = out.data_ptr<uint8_t>();
  at::parallel_for(0, out.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      uint8_t byte = 0;
      for (int64_t k = 0; k < 8; ++k) {
        const float value = v[8 * i + k];
        const bool positive = value >= 0.0f;
        e[8 * i + k] = value - (positive ? s : -s);
        byte = static_cast<uint8_t>(byte << 1 | (positive ? 1 : 0));
      }
      b[i] = byte;
    }
  });
  return out;
}

}  // namespace

// On the CPU one pass each way: the tensor ops below take several passes and temporaries over
// every element, which cost as much as the exchange they save on a slow link.
torch::Tensor pack_signs(const torch::Tensor& x) {
  TORCH_CHECK(x.numel() % 8 == 0, "pack_signs: ", x.numel(), " elements are not a multiple of 8");
  if (x.device().is_cpu() && x.scalar_type() == torch::kFloat32) {
    const auto in = x.contiguous();
    auto out = torch::empty({x.numel() / 8}, torch::kUInt8);
    const float* v = in.data_ptr<float>();
    uint8_t* b = out.data_ptr<uint8_t>();
    at::parallel_for(0, out.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        uint8_t byte = 0;
        for (int64_t k = 0; k < 8; ++k) byte = static_cast<uint8_t>(byte << 1 | (v[8 * i + k] >= 0.0f ? 1 : 0));
        b[i] = byte;
      }
    });
    return out;
  }
  const auto bits = x.ge(0).to(torch::kUInt8).view({-1, 8});
  return bits.mul(bit_weights(x.device())).sum(1, false, torch::kUInt8);
}

torch::Tensor unpack_signs(const torch::Tensor& bytes) {
  if (bytes.device().is_cpu()) {
    const auto in = bytes.contiguous();
    auto out = torch::empty({bytes.numel() * 8}, torch::kFloat32);
    const uint8_t* b = in.data_ptr<uint8_t>();
    float* v = out.data_ptr<float>();
    at::parallel_for(0, in.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        for (int64_t k = 0; k < 8; ++k) v[8 * i + k] = (b[i] >> (7 - k)) & 1 ? 1.0f : -1.0f;
    });
    return out;
  }
  const auto shifts = torch::tensor({7, 6, 5, 4, 3, 2, 1, 0}, bytes.options());
  const auto bits = bytes.reshape({-1, 1}).bitwise_right_shift(shifts).bitwise_and(1);
  return bits.reshape({-1}).to(torch::kFloat32).mul_(2.0).sub_(1.0);
}

CompressedAllReduce::CompressedAllReduce(std::shared_ptr<Comm> comm, std::vector<int64_t> sizes,
                                         torch::TensorOptions options)
    : comm_(std::move(comm)), sizes_(std::move(sizes)) {
  const int64_t w = comm_->size(), unit = 8 * w;
  for (const int64_t n : sizes_) {
    const int64_t padded = (n + unit - 1) / unit * unit;
    chunks_.push_back(padded / w);
    chunk_total_ += padded / w;
    worker_error_.push_back(torch::zeros({padded}, options));
    server_error_.push_back(torch::zeros({padded / w}, options));
  }
}

void CompressedAllReduce::average(const std::vector<torch::Tensor>& tensors) {
  TORCH_CHECK(tensors.size() == sizes_.size(), "compressed all-reduce of ", tensors.size(), " tensors, made for ",
              sizes_.size());
  torch::NoGradGuard no_grad;
  const int64_t w = comm_->size(), p = static_cast<int64_t>(sizes_.size());
  const auto float_options = worker_error_.empty() ? torch::TensorOptions() : worker_error_.front().options();
  // Phase 1: each tensor compressed with its worker error; the bytes for rank r are every
  // tensor's chunk r, tensor after tensor.
  std::vector<torch::Tensor> packed(static_cast<size_t>(p));
  auto worker_scales = torch::empty({p}, float_options);
  for (int64_t i = 0; i < p; ++i) {
    const auto& t = tensors[static_cast<size_t>(i)];
    TORCH_CHECK(t.numel() == sizes_[static_cast<size_t>(i)], "compressed all-reduce: tensor ", i, " has ",
                t.numel(), " elements, made for ", sizes_[static_cast<size_t>(i)]);
    auto& error = worker_error_[static_cast<size_t>(i)];
    auto buffer = torch::zeros_like(error);
    buffer.narrow(0, 0, t.numel()).copy_(t.reshape({-1}));
    buffer.add_(error);
    const auto scale = scale_of(buffer);
    worker_scales[i] = scale;
    packed[static_cast<size_t>(i)] = compress(buffer, scale, error).view({w, -1});
  }
  const auto send = torch::cat(packed, 1).reshape({-1});
  auto received = torch::empty_like(send);
  comm_->all_to_all(received, send, {}, {}).wait();
  auto all_worker_scales = torch::empty({w * p}, float_options);
  comm_->all_gather(all_worker_scales, worker_scales).wait();
  const auto worker_signs = unpack_signs(received).view({w, chunk_total_});
  all_worker_scales = all_worker_scales.view({w, p});

  // Phase 2: this rank's chunk of each tensor averaged, compressed with its server error.
  std::vector<torch::Tensor> server_packed(static_cast<size_t>(p));
  auto server_scales = torch::empty({p}, float_options);
  int64_t at = 0;
  for (int64_t i = 0; i < p; ++i) {
    const int64_t c = chunks_[static_cast<size_t>(i)];
    const auto signs = worker_signs.narrow(1, at, c).contiguous();
    const auto scales = all_worker_scales.select(1, i).contiguous().mul(1.0 / static_cast<double>(w)).unsqueeze(1);
    auto server = signs.mul(scales).sum(0);
    auto& error = server_error_[static_cast<size_t>(i)];
    server.add_(error);
    const auto scale = scale_of(server);
    server_scales[i] = scale;
    server_packed[static_cast<size_t>(i)] = compress(server, scale, error);
    at += c;
  }
  const auto server_send = torch::cat(server_packed);
  auto server_received = torch::empty({w * server_send.numel()}, server_send.options());
  comm_->all_gather(server_received, server_send).wait();
  auto all_server_scales = torch::empty({w * p}, float_options);
  comm_->all_gather(all_server_scales, server_scales).wait();

  // Every rank's chunks of each tensor, decompressed in rank order.
  all_server_scales = all_server_scales.view({w, p});
  if (std::all_of(tensors.begin(), tensors.end(), plain_cpu)) {
    expand(server_received, all_server_scales, tensors);
    return;
  }
  const auto server_signs = unpack_signs(server_received).view({w, chunk_total_});
  at = 0;
  for (int64_t i = 0; i < p; ++i) {
    const int64_t c = chunks_[static_cast<size_t>(i)];
    const auto values = server_signs.narrow(1, at, c).mul(all_server_scales.select(1, i).unsqueeze(1)).reshape({-1});
    const auto& t = tensors[static_cast<size_t>(i)];
    t.view({-1}).copy_(values.narrow(0, 0, t.numel()));
    at += c;
  }
}

// tensors[i] <- rank r's scale for it times its signs, chunk r after chunk r, straight from the
// bytes: one pass.
void CompressedAllReduce::expand(const torch::Tensor& bytes, const torch::Tensor& scales,
                                 const std::vector<torch::Tensor>& tensors) const {
  const int64_t w = comm_->size(), row = chunk_total_ / 8;
  const auto scale = scales.contiguous();
  const uint8_t* b = bytes.data_ptr<uint8_t>();
  int64_t at = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const int64_t c = chunks_[i], n = tensors[i].numel();
    float* out = tensors[i].data_ptr<float>();
    for (int64_t r = 0; r < w; ++r) {
      const float s = scale[r][static_cast<int64_t>(i)].item<float>();
      const uint8_t* chunk = b + r * row + at / 8;
      const int64_t first = r * c, count = std::min(c, n - first);
      at::parallel_for(0, std::max<int64_t>(count, 0), 1 << 16, [&](int64_t begin, int64_t end) {
        for (int64_t j = begin; j < end; ++j) out[first + j] = (chunk[j / 8] >> (7 - j % 8)) & 1 ? s : -s;
      });
    }
    at += c;
  }
}

std::map<std::string, torch::Tensor> CompressedAllReduce::state() const {
  std::map<std::string, torch::Tensor> state;
  for (size_t i = 0; i < sizes_.size(); ++i) {
    state[fmt::format("worker_error.{}", i)] = worker_error_[i];
    state[fmt::format("server_error.{}", i)] = server_error_[i];
  }
  return state;
}

void CompressedAllReduce::load_state(const std::map<std::string, torch::Tensor>& state) {
  torch::NoGradGuard no_grad;
  auto restore = [&](const std::string& key, torch::Tensor& into) {
    const auto found = state.find(key);
    if (found == state.end()) throw InputError(fmt::format("1-bit Adam state has no entry '{}'", key));
    if (found->second.numel() != into.numel())
      throw InputError(fmt::format("1-bit Adam state '{}' has {} elements, this layout needs {}", key,
                                   found->second.numel(), into.numel()));
    into.copy_(found->second.reshape({-1}));
  };
  for (size_t i = 0; i < sizes_.size(); ++i) {
    restore(fmt::format("worker_error.{}", i), worker_error_[i]);
    restore(fmt::format("server_error.{}", i), server_error_[i]);
  }
}

}  // namespace xtrain::parallel
