// SequenceLayout: how the tokens of one row are laid out. Default (undefined tensors): one
// causal sequence, positions 0..T-1. Packed: several documents back to back, given by their
// cumulative lengths [0, l1, l1 + l2, ..., T]; each document's positions restart at 0 and its
// tokens attend only to earlier tokens of the same document, so a packed row computes exactly
// what its documents would compute alone.
#pragma once
#include <cstdint>

#include <torch/types.h>

namespace xtrain::model {

struct SequenceLayout {
  torch::Tensor cu_seqlens;  // int64 [documents + 1], or undefined
  torch::Tensor positions;   // int64 [T]: each token's position in its document, or undefined
  int64_t longest = 0;       // the longest document's length (known on the host), when packed

  bool packed() const { return cu_seqlens.defined(); }
};

// The layout of documents with these host cumulative lengths (validated as document_ids does);
// positions go to `device`, cu_seqlens stays on the host, where the kernels read it.
SequenceLayout packed_layout(const torch::Tensor& cu_seqlens, const torch::Device& device = torch::kCPU);

}  // namespace xtrain::model
