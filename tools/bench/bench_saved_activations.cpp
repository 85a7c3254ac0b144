// Bytes a training step holds for backward, with the fused kernels off and on: the heap's bytes in
// use after the forward pass (the loss computed, its autograd graph alive) less those before it,
// as glibc counts them (mallinfo2: every tensor LibTorch allocates on the CPU is a malloc block).
// The model is recipes/bench-cpu.yaml's shape unless told otherwise; one JSON line per setting.
#include <malloc.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <torch/torch.h>

#include "model/causal_lm.h"
#include "model/kernel_choice.h"
#include "model/model_builder.h"

namespace {

size_t heap_bytes_in_use() {
  const auto info = mallinfo2();
  return info.uordblks + info.hblkhd;
}

// The bytes held from before the forward pass to its end, and the loss (the settings must agree).
std::pair<size_t, double> held_by_forward(xtrain::model::CausalLM& model, const torch::Tensor& tokens) {
  model.zero_grad();
  const size_t before = heap_bytes_in_use();
  auto loss = xtrain::model::next_token_loss(model, tokens);
  const size_t after = heap_bytes_in_use();
  loss.backward();
  return {after - before, loss.item<double>()};
}

}  // namespace

int main(int argc, char** argv) {
  xtrain::model::ModelConfig config;
  config.vocab_size = 256;  // bench-cpu.yaml's byte-level data
  config.hidden_size = 256;
  config.num_layers = 4;
  config.num_heads = 8;
  config.num_kv_heads = 4;
  config.intermediate_size = 704;
  int64_t batch = 8, seq = 256;
  CLI::App app{"Bytes saved for backward per step, fused kernels off and on"};
  app.add_option("--hidden", config.hidden_size);
  app.add_option("--layers", config.num_layers);
  app.add_option("--heads", config.num_heads);
  app.add_option("--kv-heads", config.num_kv_heads);
  app.add_option("--intermediate", config.intermediate_size);
  app.add_option("--vocab", config.vocab_size);
  app.add_option("--batch", batch);
  app.add_option("--seq", seq);
  CLI11_PARSE(app, argc, argv);
  config.max_seq_len = seq;
  auto model = xtrain::model::build_model(config, 1);
  torch::manual_seed(1);
  const auto tokens = torch::randint(0, config.vocab_size, {batch, seq + 1}, torch::kInt64);
  held_by_forward(*model, tokens);  // the first step's one-time allocations (gradients, tables)
  for (const bool fused : {false, true}) {
    xtrain::model::use_fused_kernels(*model, fused);
    const auto [bytes, loss] = held_by_forward(*model, tokens);
    fmt::print("{{\"fused_kernels\": {}, \"saved_for_backward_mib\": {:.2f}, \"per_token_bytes\": {:.0f}, "
               "\"loss\": {:.6f}}}\n",
               fused, bytes / 1048576.0, static_cast<double>(bytes) / static_cast<double>(batch * seq), loss);
  }
  return 0;
}
