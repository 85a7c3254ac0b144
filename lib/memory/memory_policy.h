// Memory policy: how a built model trades compute for memory. Installed on a model after it
// is built (the model itself knows nothing about recompute or offload):
//   recompute none       keep every activation
//   recompute full       keep only each block's input; recompute the block in backward
//   recompute selective  recompute only the attention kernel (its scores/probabilities)
//   recompute_ratio      fraction of blocks (the first ones) that recompute
//   vision_recompute_ratio  the same for a vision tower's blocks (full recompute), which
//                        recompute_ratio then leaves out
//   offload              with full recompute, keep the block inputs in host memory
//   attention blockwise  the attention kernel with memory linear in sequence length
//   attention sdpa       LibTorch's fused kernels (varlen flash for packed rows on CUDA)
//   fused_kernels        the fused kernels where they apply (model/kernels/fused_rms_norm.h)
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "layout/memory_choices.h"
#include "memory/activation_offload.h"
#include "model/causal_lm.h"

namespace xtrain::memory {

struct MemoryOptions {
  Recompute recompute = Recompute::none;
  double recompute_ratio = 1.0;
  bool offload_activations = false;
  Attention attention = Attention::naive;  // resolved: never automatic
  int64_t attention_block_size = 256;
  double vision_recompute_ratio = 1.0;
  bool fused_kernels = true;
};

// Number of blocks that recompute under these options.
int64_t recomputed_blocks(const MemoryOptions& options, int64_t num_layers);

// What a layout makes of each layer's attention kernel once the policy has chosen it, before
// selective recompute wraps it (context parallelism: a kernel that sees the whole row).
using KernelWrap = std::function<model::AttentionKernel(model::AttentionKernel chosen)>;

// `inner` (empty: model::causal_attention) run without keeping its activations and re-run in
// backward: selective recompute. The variant's sinks, when given, are an input of the
// recomputed function like q, k and v, so that their gradient flows out of the replay.
model::AttentionKernel recomputed_kernel(model::AttentionKernel inner);

// Installs the policy on the model. The returned offloader (null without offload) must
// outlive the model's use and have begin_forward() called before each forward pass.
std::shared_ptr<ActivationOffloader> apply_memory_policy(model::CausalLM& model, const MemoryOptions& options,
                                                         const KernelWrap& wrap_kernel = {});

}  // namespace xtrain::memory
