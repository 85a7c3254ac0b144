// SequenceLayout: how the tokens of one row are laid out. Default (undefined tensors): one
// causal sequence, positions 0..T-1. Packed: several documents back to back, given by their
// cumulative lengths [0, l1, l1 + l2, ..., T]; each document's positions restart at 0 and its
// tokens attend only to earlier tokens of the same document, so a packed row computes exactly
// what its documents would compute alone.
//
// Under context parallelism a rank holds only some spans of each row (ContextShard): positions
// then give the rotary position of each of its tokens, cu_seqlens and longest stay the whole
// row's, and the attention kernel (a context-parallel one) reads `context` to see the rest.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include <torch/types.h>

namespace xtrain::model {

// Tokens [begin, begin + length) of a row.
struct TokenSpan {
  int64_t begin = 0;
  int64_t length = 0;
  int64_t end() const { return begin + length; }
  bool operator==(const TokenSpan& other) const { return begin == other.begin && length == other.length; }
};

// How every row of a batch is split over the ranks of a context-parallel group: rank r holds
// the tokens of spans[r], in that order, and every rank the same number of them.
struct ContextShard {
  int64_t row_length = 0;  // tokens of the whole row
  int64_t rank = 0;        // this rank's index in the group
  std::vector<std::vector<TokenSpan>> spans;  // by rank

  int64_t ranks() const { return static_cast<int64_t>(spans.size()); }
  int64_t local_length() const;
  // int64 [local_length()]: the row positions of rank r's tokens, in its order.
  torch::Tensor row_index(int64_t r) const;
};

struct SequenceLayout {
  torch::Tensor cu_seqlens;  // int64 [documents + 1], or undefined
  torch::Tensor positions;   // int64 [T]: each token's rotary position, or undefined (0..T-1)
  int64_t longest = 0;       // the longest document's length (known on the host), when packed
  std::shared_ptr<const ContextShard> context;  // the row's split over context-parallel ranks

  bool packed() const { return cu_seqlens.defined(); }
};

// The layout of documents with these host cumulative lengths (validated as document_ids does);
// positions go to `device`, cu_seqlens stays on the host, where the kernels read it.
SequenceLayout packed_layout(const torch::Tensor& cu_seqlens, const torch::Device& device = torch::kCPU);

// The layout of this rank's part of a row laid out as `whole` (one causal sequence of
// shard->row_length tokens when `whole` is not packed): the positions of its tokens.
SequenceLayout context_layout(const SequenceLayout& whole, std::shared_ptr<const ContextShard> shard,
                              const torch::Device& device = torch::kCPU);

}  // namespace xtrain::model
