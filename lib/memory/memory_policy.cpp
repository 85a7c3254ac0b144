#include "memory/memory_policy.h"

#include <cmath>

#include <torch/torch.h>

#include "memory/recompute.h"
#include "model/attention/blockwise_attention.h"
#include "model/kernel_choice.h"
#include "model/attention/sdpa_attention.h"

namespace xtrain::memory {

namespace {

int64_t share_of(double ratio, int64_t blocks) {
  return static_cast<int64_t>(std::ceil(ratio * static_cast<double>(blocks) - 1e-9));
}

}  // namespace

int64_t recomputed_blocks(const MemoryOptions& options, int64_t num_layers) {
  if (options.recompute == Recompute::none) return 0;
  return share_of(options.recompute_ratio, num_layers);
}

model::AttentionKernel recomputed_kernel(model::AttentionKernel inner) {
  return [inner](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                 const model::SequenceLayout& layout, const model::AttentionVariant& variant) {
    const bool sinks = variant.has_sinks();
    auto rest = variant;  // the replay takes the sinks from its inputs, not from the closure
    rest.sinks = torch::Tensor();
    auto attend = [inner, layout, rest, sinks](const std::vector<torch::Tensor>& in) {
      auto replayed = rest;
      if (sinks) replayed.sinks = in[3];
      return inner ? inner(in[0], in[1], in[2], layout, replayed)
                   : model::causal_attention(in[0], in[1], in[2], layout.cu_seqlens, replayed);
    };
    return sinks ? recompute(attend, {q, k, v, variant.sinks}) : recompute(attend, {q, k, v});
  };
}

std::shared_ptr<ActivationOffloader> apply_memory_policy(model::CausalLM& model, const MemoryOptions& options,
                                                         const KernelWrap& wrap_kernel) {
  const int64_t count = recomputed_blocks(options, model.config().num_layers);
  model::use_fused_kernels(model, options.fused_kernels);
  // Both kernels take the same arguments: pick one, install it on every layer.
  const auto tiled = options.attention == Attention::blockwise ? model::blockwise_causal_attention
                     : options.attention == Attention::sdpa    ? model::sdpa_causal_attention
                                                               : nullptr;
  if (tiled) {
    const int64_t block_size = options.attention_block_size;
    for (auto* kernel : model.attention_kernels())
      *kernel = [tiled, block_size](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                    const model::SequenceLayout& layout, const model::AttentionVariant& variant) {
        return tiled(q, k, v, layout.cu_seqlens, block_size, variant);
      };
  }
  if (wrap_kernel)
    for (auto* kernel : model.attention_kernels()) *kernel = wrap_kernel(*kernel);
  std::shared_ptr<ActivationOffloader> offloader;
  if (options.recompute == Recompute::full) {
    if (options.offload_activations) offloader = std::make_shared<ActivationOffloader>();
    ActivationOffloader* raw = offloader.get();
    const int64_t vision = model.vision_blocks();
    const int64_t vision_count = share_of(options.vision_recompute_ratio, vision);
    model.block_runner = [count, vision, vision_count, raw](int64_t layer, const torch::Tensor& x,
                                                            const model::BlockFn& block) {
      const bool recomputes = layer < vision ? layer < vision_count : layer - vision < count;
      if (!recomputes) return block(x);
      return recompute([block](const std::vector<torch::Tensor>& in) { return block(in[0]); }, {x}, raw);
    };
  } else if (options.recompute == Recompute::selective) {
    const auto kernels = model.attention_kernels();
    for (int64_t i = 0; i < count; ++i) *kernels[i] = recomputed_kernel(*kernels[i]);
  }
  return offloader;
}

}  // namespace xtrain::memory
