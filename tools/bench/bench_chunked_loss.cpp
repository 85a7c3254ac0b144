// Times one forward + backward of the output-projection cross-entropy, chunked
// (memory::chunked_cross_entropy) or unchunked (full logits, then cross_entropy), and prints a
// JSON line {impl, tokens, vocab, hidden, chunk_tokens, peak_rss_mib, seconds}. peak_rss_mib is
// the peak RSS minus the RSS once the inputs exist, i.e. what the loss step itself adds. One
// variant per process, because peak RSS (getrusage) only ever grows within a process.
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <fstream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <torch/torch.h>

#include "layout/loss_chunking.h"
#include "memory/chunked_loss.h"

namespace {

double resident_mib() {
  long pages = 0, resident = 0;
  std::ifstream("/proc/self/statm") >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

double peak_resident_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);  // ru_maxrss is in KiB on Linux
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string impl = "chunked";
  int64_t tokens = 8192, vocab = 131072, hidden_size = 1024, budget_mib = 256;
  int threads = 0;
  CLI::App app{"Output projection + cross-entropy forward + backward benchmark"};
  app.add_option("--impl", impl, "chunked or full")->check(CLI::IsMember({"chunked", "full"}));
  app.add_option("--tokens", tokens);
  app.add_option("--vocab", vocab);
  app.add_option("--hidden", hidden_size);
  app.add_option("--budget-mib", budget_mib, "logits budget that picks the chunk size");
  app.add_option("--threads", threads, "intra-op threads (0: LibTorch default)");
  CLI11_PARSE(app, argc, argv);
  if (threads > 0) torch::set_num_threads(threads);

  torch::manual_seed(0);
  auto hidden = (torch::randn({tokens, hidden_size}) * 0.1).requires_grad_(true);
  auto weight = (torch::randn({vocab, hidden_size}) * 0.02).requires_grad_(true);
  auto targets = torch::randint(vocab, {tokens});
  const double baseline_mib = resident_mib();

  const int64_t chunk = impl == "chunked" ? xtrain::layout::auto_chunk_tokens(vocab, tokens, budget_mib << 20) : tokens;
  const auto start = std::chrono::steady_clock::now();
  auto loss = impl == "chunked"
                  ? xtrain::memory::chunked_cross_entropy(hidden, weight, targets, chunk)
                  : torch::nn::functional::cross_entropy(torch::mm(hidden, weight.t()), targets);
  loss.backward();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  fmt::print(
      "{{\"impl\": \"{}\", \"tokens\": {}, \"vocab\": {}, \"hidden\": {}, \"chunk_tokens\": {}, \"loss\": {:.6f}, "
      "\"peak_rss_mib\": {:.1f}, \"seconds\": {:.3f}}}\n",
      impl, tokens, vocab, hidden_size, chunk, loss.item<double>(), peak_resident_mib() - baseline_mib, seconds);
  return 0;
}
