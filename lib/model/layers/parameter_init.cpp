#include "model/layers/parameter_init.h"

#include <stdexcept>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "model/layers/init_blocks_in_parallel.h"

namespace xtrain::model {
namespace {

// SplitMix64's finaliser: adjacent inputs give unrelated outputs.
uint64_t split_mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

uint64_t fnv1a(const std::string& text) {
  uint64_t hash = 0xCBF29CE484222325ULL;
  for (unsigned char c : text) hash = (hash ^ c) * 0x100000001B3ULL;
  return hash;
}

}  // namespace

torch::Tensor initial_values(const ParameterInit& init, uint64_t seed, const std::string& name, int64_t begin,
                             int64_t count) {
  const auto fp32 = torch::TensorOptions().dtype(torch::kFloat32);
  if (init.kind == ParameterInit::Kind::zeros) return torch::zeros({count}, fp32);
  if (init.kind == ParameterInit::Kind::ones) return torch::ones({count}, fp32);
  if (init.kind == ParameterInit::Kind::constant) return torch::full({count}, init.value, fp32);
  auto out = torch::empty({count}, fp32);
  if (count == 0) return out;
  const uint64_t name_seed = split_mix(seed ^ split_mix(fnv1a(name)));
  const int64_t first_block = begin / kInitBlock, end_block = (begin + count - 1) / kInitBlock + 1;
  // Blocks are independent: drawn in parallel, each into its own part of `out`. Whole blocks
  // are drawn, whatever the slice and the parameter's size: a draw's values may depend on its
  // length (normal_ fills in vectors of 16).
  for_each_block_in_parallel(first_block, end_block, [&](int64_t block) {
    const int64_t block_begin = block * kInitBlock;
    const int64_t first = std::max(begin, block_begin), last = std::min(begin + count, block_begin + kInitBlock);
    auto generator = at::make_generator<at::CPUGeneratorImpl>(split_mix(name_seed + static_cast<uint64_t>(block)));
    auto values = torch::empty({kInitBlock}, fp32).normal_(0.0, init.std, generator);
    out.narrow(0, first - begin, last - first).copy_(values.narrow(0, first - block_begin, last - first));
  });
  return out;
}

ParameterSource init_source(InitPlan plan, uint64_t seed) {
  return [plan = std::move(plan), seed](const std::string& name, int64_t begin, int64_t count) {
    auto it = plan.find(name);
    if (it == plan.end()) throw std::logic_error("init_source: no init for parameter " + name);
    return initial_values(it->second, seed, name, begin, count);
  };
}

}  // namespace xtrain::model
