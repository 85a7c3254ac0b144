// memory.chunked_loss as numbers: how many tokens one chunk of the chunked output projection and
// loss (memory/chunked_loss.h) takes. The engine cuts its loss by this rule and the planner counts
// the loss's memory and collectives by it. No LibTorch, no recipe: the spec's text and the
// widths come in as plain values.
#pragma once
#include <cstdint>
#include <string>

namespace xtrain::layout {

// What "auto" spends on a chunk: its fp32 logits and the gradient they become.
inline constexpr int64_t kLossChunkBudgetBytes = int64_t{256} << 20;

// The largest chunk whose fp32 [chunk, vocab_size] logits and one same-sized temporary fit in
// budget_bytes, clamped to [1, num_tokens]. The whole vocabulary counts, also under tensor
// parallelism (a rank's part is smaller, so the chunk is an upper bound there).
int64_t auto_chunk_tokens(int64_t vocab_size, int64_t num_tokens, int64_t budget_bytes = kLossChunkBudgetBytes);

// Tokens a chunk for memory.chunked_loss `spec` ("off": 0, unchunked; "auto": auto_chunk_tokens
// over a micro batch's tokens; a positive number, which the recipe check has vetted: itself).
int64_t loss_chunk_tokens(const std::string& spec, int64_t vocab_size, int64_t micro_batch_tokens);

}  // namespace xtrain::layout
