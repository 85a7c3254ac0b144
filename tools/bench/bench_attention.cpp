// Times one forward + backward of causal self-attention for one configuration and prints a JSON
// line {impl, seq, heads, kv_heads, head_dim, dtype, block_size, peak_rss_mib, seconds}. One
// configuration per process, because peak RSS (getrusage) only ever grows within a process.
#include <sys/resource.h>

#include <chrono>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <torch/torch.h>

#include "model/attention/attention.h"
#include "model/attention/blockwise_attention.h"
#include "model/attention/sdpa_attention.h"

int main(int argc, char** argv) {
  std::string impl = "blockwise", dtype = "fp32";
  int64_t batch = 1, seq = 4096, heads = 8, kv_heads = 4, head_dim = 64, block_size = 256;
  int threads = 0;
  CLI::App app{"Causal attention forward + backward benchmark"};
  app.add_option("--impl", impl, "blockwise, naive or sdpa")->check(CLI::IsMember({"blockwise", "naive", "sdpa"}));
  app.add_option("--dtype", dtype, "fp32 or bf16")->check(CLI::IsMember({"fp32", "bf16"}));
  app.add_option("--batch", batch);
  app.add_option("--seq", seq);
  app.add_option("--heads", heads);
  app.add_option("--kv-heads", kv_heads);
  app.add_option("--head-dim", head_dim);
  app.add_option("--block-size", block_size);
  app.add_option("--threads", threads, "intra-op threads (0: LibTorch default)");
  CLI11_PARSE(app, argc, argv);
  if (threads > 0) torch::set_num_threads(threads);

  torch::manual_seed(0);
  const auto type = dtype == "bf16" ? torch::kBFloat16 : torch::kFloat32;
  auto input = [&](int64_t n) { return torch::randn({batch, n, seq, head_dim}, type).requires_grad_(true); };
  auto q = input(heads), k = input(kv_heads), v = input(kv_heads);
  auto grad = torch::randn({batch, heads, seq, head_dim}, type);

  const auto start = std::chrono::steady_clock::now();
  auto out = impl == "naive"  ? xtrain::model::causal_attention(q, k, v)
             : impl == "sdpa" ? xtrain::model::sdpa_causal_attention(q, k, v)
                              : xtrain::model::blockwise_causal_attention(q, k, v, {}, block_size);
  out.backward(grad);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);  // ru_maxrss is in KiB on Linux
  fmt::print(
      "{{\"impl\": \"{}\", \"seq\": {}, \"heads\": {}, \"kv_heads\": {}, \"head_dim\": {}, \"dtype\": \"{}\", "
      "\"block_size\": {}, \"peak_rss_mib\": {:.1f}, \"seconds\": {:.3f}}}\n",
      impl, seq, heads, kv_heads, head_dim, dtype, block_size, usage.ru_maxrss / 1024.0, seconds);
  return 0;
}
