// Times each fused kernel against the unfused ops it replaces, forward and forward + backward, on
// the same tensors in alternating rounds of one process (so that both see the same machine), and
// prints one JSON line per kernel and shape: the medians and the unfused / fused ratios.
#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <torch/torch.h>

#include "model/kernels/fused_rms_norm.h"
#include "model/kernels/fused_rotary.h"
#include "model/kernels/fused_swiglu.h"
#include "model/layers/rotary.h"
#include "optim/adamw.h"

namespace {

using Clock = std::chrono::steady_clock;
using Tensors = std::vector<torch::Tensor>;
using Variant = std::function<Tensors(const Tensors&)>;

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

double seconds_of(const std::function<void()>& work) {
  const auto start = Clock::now();
  work();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// One kernel on one shape: its inputs (leaves that require grad), the upstream gradients, and the
// fused and unfused computations of the same outputs.
struct KernelCase {
  std::string kernel;
  int64_t width;
  Tensors inputs;
  Tensors grads;
  Variant fused, unfused;
};

struct Timing {
  std::vector<double> forward, step;
};

void time_round(const Variant& variant, const KernelCase& c, Timing& timing) {
  timing.forward.push_back(seconds_of([&] {
    torch::NoGradGuard no_grad;
    variant(c.inputs);
  }));
  timing.step.push_back(seconds_of([&] { torch::autograd::backward(variant(c.inputs), c.grads); }));
  for (const auto& input : c.inputs) input.mutable_grad() = torch::Tensor();
}

void bench(const KernelCase& c, int64_t rows, int rounds) {
  Timing fused, unfused;
  for (int round = 0; round < rounds + 1; ++round) {  // round 0 warms up and is dropped
    const bool fused_first = round % 2 == 1;
    time_round(fused_first ? c.fused : c.unfused, c, fused_first ? fused : unfused);
    time_round(fused_first ? c.unfused : c.fused, c, fused_first ? unfused : fused);
    if (round == 0) fused = unfused = Timing{};
  }
  const double f = median(fused.forward), u = median(unfused.forward);
  const double fs = median(fused.step), us = median(unfused.step);
  fmt::print(
      "{{\"kernel\": \"{}\", \"rows\": {}, \"width\": {}, \"threads\": {}, \"rounds\": {}, "
      "\"fused_forward_ms\": {:.3f}, \"unfused_forward_ms\": {:.3f}, \"forward_speedup\": {:.2f}, "
      "\"fused_step_ms\": {:.3f}, \"unfused_step_ms\": {:.3f}, \"step_speedup\": {:.2f}}}\n",
      c.kernel, rows, c.width, torch::get_num_threads(), rounds, f * 1e3, u * 1e3, u / f, fs * 1e3, us * 1e3,
      us / fs);
}

torch::Tensor leaf(torch::Tensor t) { return t.requires_grad_(true); }

// x [rows, d] and the gain w [d].
KernelCase rms_norm_case(int64_t rows, int64_t d) {
  const double eps = 1e-6;
  return {"rms_norm", d, {leaf(torch::randn({rows, d})), leaf(1 + 0.1 * torch::randn({d}))}, {torch::randn({rows, d})},
          [eps](const Tensors& in) { return Tensors{xtrain::model::fused_rms_norm(in[0], in[1], eps)}; },
          [eps](const Tensors& in) {
            return Tensors{in[1] * (in[0] * torch::rsqrt(in[0].pow(2).mean(-1, true) + eps))};
          }};
}

// The residual add and the norm after it: against the add followed by the fused RMSNorm alone, so
// that the ratio is what fusing the add earns.
KernelCase add_rms_norm_case(int64_t rows, int64_t d) {
  const double eps = 1e-6;
  return {"add_rms_norm", d,
          {leaf(torch::randn({rows, d})), leaf(torch::randn({rows, d})), leaf(1 + 0.1 * torch::randn({d}))},
          {torch::randn({rows, d}), torch::randn({rows, d})},
          [eps](const Tensors& in) {
            const auto [h, y] = xtrain::model::fused_add_rms_norm(in[0], in[1], in[2], eps);
            return Tensors{h, y};
          },
          [eps](const Tensors& in) {
            auto h = in[0] + in[1];
            return Tensors{h, xtrain::model::fused_rms_norm(h, in[2], eps)};
          }};
}

// gate and up [rows, width], as an MLP of intermediate size `width` sees them.
KernelCase swiglu_case(int64_t rows, int64_t width) {
  return {"swiglu", width, {leaf(2 * torch::randn({rows, width})), leaf(torch::randn({rows, width}))},
          {torch::randn({rows, width})},
          [](const Tensors& in) { return Tensors{xtrain::model::fused_swiglu(in[0], in[1])}; },
          [](const Tensors& in) { return Tensors{torch::silu(in[0]) * in[1]}; }};
}

// q and k of a layer of hidden size `width` (heads of 64, half as many key heads) over rows tokens
// in sequences of 512, as attention holds them: [B, T, H, 64] projections seen as [B, H, T, 64].
KernelCase rotary_case(int64_t rows, int64_t width) {
  const int64_t seq = std::min<int64_t>(512, rows), batch = rows / seq, head_dim = 64;
  const int64_t q_heads = std::max<int64_t>(1, width / head_dim), k_heads = std::max<int64_t>(1, q_heads / 2);
  const auto tables = xtrain::model::rotary_tables(seq, head_dim, 10000.0);
  const auto heads = [](const torch::Tensor& t) { return t.transpose(1, 2); };
  return {"rotary", width,
          {leaf(torch::randn({batch, seq, q_heads, head_dim})), leaf(torch::randn({batch, seq, k_heads, head_dim}))},
          {torch::randn({batch, q_heads, seq, head_dim}), torch::randn({batch, k_heads, seq, head_dim})},
          [=](const Tensors& in) {
            const auto [q, k] = xtrain::model::fused_rotary(heads(in[0]), heads(in[1]), tables.cos, tables.sin);
            return Tensors{q, k};
          },
          [=](const Tensors& in) {
            return Tensors{xtrain::model::apply_rotary(heads(in[0]), tables.cos, tables.sin),
                           xtrain::model::apply_rotary(heads(in[1]), tables.cos, tables.sin)};
          }};
}

// One AdamW step over `elements` parameters held as one flat buffer (an FSDP shard unit): the
// one-pass kernel against the multi-tensor ops, alternating.
void bench_adamw(int64_t elements, int rounds) {
  auto make = [&](bool fused) {
    auto p = torch::randn({elements});
    p.mutable_grad() = torch::randn({elements}) * 1e-3;
    return std::make_pair(p, xtrain::optim::AdamW({{"flat", p}}, {0.9, 0.95, 1e-8, 0.1, fused}));
  };
  auto [fused_p, fused] = make(true);
  auto [plain_p, plain] = make(false);
  std::vector<double> fused_s, plain_s;
  for (int round = 0; round < rounds + 1; ++round) {
    const double f = seconds_of([&] { fused.step(1e-3); }), u = seconds_of([&] { plain.step(1e-3); });
    if (round == 0) continue;
    fused_s.push_back(f);
    plain_s.push_back(u);
  }
  const double f = median(fused_s), u = median(plain_s);
  fmt::print("{{\"kernel\": \"adamw\", \"elements\": {}, \"threads\": {}, \"rounds\": {}, \"fused_step_ms\": {:.3f}, "
             "\"unfused_step_ms\": {:.3f}, \"step_speedup\": {:.2f}}}\n",
             elements, torch::get_num_threads(), rounds, f * 1e3, u * 1e3, u / f);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t rows = 4096;
  std::vector<int64_t> widths{256, 768, 2048};
  std::vector<std::string> kernels{"rms_norm", "add_rms_norm", "swiglu", "rotary", "adamw"};
  int rounds = 21, threads = 0;
  CLI::App app{"Fused kernels against the unfused ops"};
  app.add_option("--rows", rows, "tokens per call");
  app.add_option("--widths", widths, "hidden sizes; SwiGLU's intermediate width is 8/3 of each, rounded to 64");
  app.add_option("--kernels", kernels, "which kernels")->check(CLI::IsMember({"rms_norm", "add_rms_norm", "swiglu", "rotary", "adamw"}));
  app.add_option("--rounds", rounds, "timed rounds of each variant (median reported)");
  app.add_option("--threads", threads, "intra-op threads (0: LibTorch default)");
  CLI11_PARSE(app, argc, argv);
  if (threads > 0) torch::set_num_threads(threads);
  for (const auto& kernel : kernels)
    for (int64_t d : widths) {
      if (kernel == "adamw") {  // a shard unit of one layer of hidden size d: 12 d^2 parameters
        bench_adamw(12 * d * d, rounds);
        continue;
      }
      torch::manual_seed(0);
      const int64_t intermediate = (8 * d / 3 + 63) / 64 * 64;
      bench(kernel == "rms_norm"       ? rms_norm_case(rows, d)
            : kernel == "add_rms_norm" ? add_rms_norm_case(rows, d)
            : kernel == "swiglu"       ? swiglu_case(rows, intermediate)
                                 : rotary_case(rows, d),
            rows, rounds);
    }
  return 0;
}
