// The one memory model the engine's start-up bound and the planner count with
// (layout/activation_memory.h, layout/loss_chunking.h): element sizes, a layer's saved set, the
// block inputs, the logits and the loss chunk, on shapes small enough to count by hand. The
// figures are those the engine's and the planner's own copies gave before they shared these.
#include <catch2/catch.hpp>

#include "layout/activation_memory.h"
#include "layout/loss_chunking.h"

using namespace xtrain;

TEST_CASE("an activation element is 4 bytes in fp32 and 2 under mixed precision", "[layout]") {
  CHECK(layout::activation_bytes(true) == 4);
  CHECK(layout::activation_bytes(false) == 2);
}

TEST_CASE("a layer's saved set counts attention, norms and the MLP, split by tp", "[layout]") {
  layout::LayerWidths dense;
  dense.hidden = 64;
  dense.query_width = 64;
  dense.key_width = 32;
  dense.value_width = 64;
  dense.intermediate = 256;
  // 2 x 64 (norm) + 64 + 2 x 32 + 64 (q, k, v, output) + 2 x 64 (MLP norm) + 3 x 256 (MLP), 2 bytes each.
  auto bytes = layout::layer_activation_bytes(dense, {}, 2);
  CHECK(bytes.set == 2432);
  CHECK(bytes.mlp == 1536);
  // tp 2 with sequence parallelism halves every width.
  bytes = layout::layer_activation_bytes(dense, {2, true, 1}, 2);
  CHECK(bytes.set == 1216);
  CHECK(bytes.mlp == 768);
  // Without sequence parallelism the residual stream stays whole: 4 x 64 + 192 / 2 + 384.
  CHECK(layout::layer_activation_bytes(dense, {2, false, 1}, 2).set == 2 * (256 + 96 + 384));

  auto routed = dense;
  routed.routed = true;
  routed.experts = 8;
  routed.top_k = 2;
  routed.moe_intermediate = 32;
  routed.shared_experts = 1;
  // Busiest expert's rows 2 x 1.25: 2.5 x 96 + 96 (shared) intermediates, 2.5 x 128 rows in and
  // out, 8 fp32 router logits (16 elements of 2 bytes).
  bytes = layout::layer_activation_bytes(routed, {}, 2);
  CHECK(bytes.mlp == 672);
  CHECK(bytes.set == 2240);
}

TEST_CASE("the block inputs are what every recompute setting keeps, split by cp and sequence-parallel tp",
          "[layout]") {
  CHECK(layout::block_input_bytes(64, {}, 2) == 128);
  CHECK(layout::block_input_bytes(64, {2, true, 1}, 2) == 64);
  CHECK(layout::block_input_bytes(64, {2, false, 1}, 4) == 256);
  const int64_t block_inputs = 256 * 128 * 4 * 4;  // tokens x hidden x fp32 x layers
  CHECK(layout::kept_block_inputs_bytes(256, 128, 4, {}, 4) == block_inputs);
  CHECK(layout::kept_block_inputs_bytes(256, 128, 4, {4, true, 1}, 4) == block_inputs / 4);
  CHECK(layout::kept_block_inputs_bytes(256, 128, 4, {4, false, 1}, 4) == block_inputs);
  CHECK(layout::kept_block_inputs_bytes(256, 128, 4, {2, true, 4}, 4) == block_inputs / 8);
}

TEST_CASE("the loss holds its fp32 logits, or one chunk of them and its input's gradient", "[layout]") {
  CHECK(layout::fp32_logits_bytes(256, 1000, 1) == 256 * 1000 * 4);
  CHECK(layout::fp32_logits_bytes(256 / 4, 1000, 2) == 128000);
  // Unchunked: the log-softmax backward's three fp32 copies of the logits.
  CHECK(layout::loss_bytes(1024, 0, 1000, 64, 1, 2) == 1024 * 1000 * 12);
  // A chunk of 256 over half the vocabulary (fp32, and its bf16 copy), and the [1024, 64] gradient
  // of the loss's input; in fp32 the copy is the chunk itself.
  CHECK(layout::loss_bytes(1024, 256, 1000, 64, 2, 2) == 256 * 500 * 6 + 1024 * 64 * 2);
  CHECK(layout::loss_bytes(1024, 256, 1000, 64, 2, 4) == 256 * 500 * 4 + 1024 * 64 * 4);
}

TEST_CASE("the auto loss chunk fits two fp32 rows of logits a token in the budget, within [1, tokens]",
          "[layout][chunked_loss]") {
  // Two fp32 rows of 1024 logits take 8 KiB.
  CHECK(layout::auto_chunk_tokens(1024, 1000, 8 << 10) == 1);
  CHECK(layout::auto_chunk_tokens(1024, 1000, 80 << 10) == 10);
  CHECK(layout::auto_chunk_tokens(1024, 4, 80 << 10) == 4);
  CHECK(layout::auto_chunk_tokens(1 << 20, 1000, 1024) == 1);
  CHECK(layout::auto_chunk_tokens(131072, 8192) == 256);
  CHECK(layout::auto_chunk_tokens(128256, 8192) == 261);  // Llama 3's vocabulary: 256 MiB / 1,026,048 B
  CHECK(layout::auto_chunk_tokens(0, 0) == 1);
}

TEST_CASE("memory.chunked_loss resolves to tokens a chunk: off, auto or a number", "[layout][chunked_loss]") {
  CHECK(layout::loss_chunk_tokens("off", 128256, 8192) == 0);
  CHECK(layout::loss_chunk_tokens("512", 128256, 8192) == 512);
  CHECK(layout::loss_chunk_tokens("auto", 128256, 8192) == 261);
  CHECK(layout::loss_chunk_tokens("auto", 257, 8 * 256) == 8 * 256);  // a small vocabulary: one chunk
}
