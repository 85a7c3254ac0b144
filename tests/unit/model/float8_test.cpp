// FP8 linear layers against their references: torchao's Float8Linear in emulate mode for its
// tensorwise, rowwise and rowwise_with_gw_hp recipes (tools/reference/float8_torchao.py), and for blockwise an
// independent tile-by-tile rendering of DeepSeek-V3's scheme (tools/reference/float8_blockwise.py),
// whose quantized operands must be ours byte for byte. Then the FP8 gather of an FSDP unit over
// thread ranks: its weights come back as the one-process layer quantizes them, with its scales.
#include <cstdlib>

#include <ATen/autocast_mode.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include <catch2/catch.hpp>

#include "ckpt/safetensors.h"
#include "model/layers/float8_linear.h"
#include "parallel/shard_unit.h"
#include "parallel/thread_comm.h"
#include "parallel/rank_threads.h"
#include "scratch_dir.h"
#include "tensor_compare.h"

using namespace xtrain;

namespace {

struct LinearCase {
  torch::Tensor x, weight, grad_out;
};

LinearCase linear_case(int64_t m, int64_t k, int64_t n) {
  torch::manual_seed(17);
  // Columns of very different magnitudes, so that per-row, per-column and per-block scales differ.
  const auto spread = torch::exp(torch::linspace(-3, 3, k));
  return {torch::randn({m, k}) * spread, torch::randn({n, k}) * 0.1, torch::randn({m, n})};
}

ckpt::TensorMap run_reference(const std::string& script, const LinearCase& c) {
  testing::ScratchDir scratch;
  const auto in = (scratch.path() / "in.safetensors").string(), out = (scratch.path() / "out.safetensors").string();
  ckpt::save_safetensors(in, {{"x", c.x}, {"weight", c.weight}, {"grad_out", c.grad_out}});
  const auto command = fmt::format("{} {}/tools/reference/{} --inputs {} --out {} 2>/dev/null", XTRAIN_PYTHON,
                                   XTRAIN_SOURCE_DIR, script, in, out);
  REQUIRE(std::system(command.c_str()) == 0);
  return ckpt::load_safetensors(out).tensors;
}

struct LinearResult {
  torch::Tensor y, grad_x, grad_weight;
};

LinearResult run_layer(const LinearCase& c, const model::Float8Recipe& recipe) {
  const auto x = c.x.clone().requires_grad_(true);
  const auto weight = c.weight.clone().requires_grad_(true);
  const auto y = model::float8_linear(x, weight, {}, recipe);
  (y * c.grad_out).sum().backward();
  return {y.detach(), x.grad(), weight.grad()};
}

c10::ScalarType format_named(const std::string& name) {
  return name == "e4m3" ? c10::ScalarType::Float8_e4m3fn : c10::ScalarType::Float8_e5m2;
}

}  // namespace

TEST_CASE("tensorwise and rowwise FP8 linear layers compute torchao's Float8Linear", "[model][float8]") {
  const auto c = linear_case(48, 96, 80);
  const auto golden = run_reference("float8_torchao.py", c);
  double worst = 0;
  for (const auto scaling : {model::Float8Scaling::tensorwise, model::Float8Scaling::rowwise,
                             model::Float8Scaling::rowwise_with_gw_hp})
    for (const std::string format : {"e4m3", "e5m2"}) {
      const std::string prefix = fmt::format("{}.{}.", to_string(scaling), format);
      INFO(prefix);
      const auto result = run_layer(c, {scaling, format_named(format)});
      for (const auto& [name, tensor] : {std::pair<std::string, torch::Tensor>{"y", result.y},
                                         {"grad_x", result.grad_x}, {"grad_weight", result.grad_weight}}) {
        INFO(name);
        const double error = testing::max_relative_error(tensor, golden.at(prefix + name));
        CHECK(error <= 1e-6);
        worst = std::max(worst, error);
      }
    }
  WARN("worst relative error against torchao: " << worst);
}

TEST_CASE("under bf16 autocast an FP8 linear layer takes and returns bf16, as F::linear and torchao do",
          "[model][float8]") {
  const auto c = linear_case(48, 96, 80);
  for (const auto scaling : {model::Float8Scaling::tensorwise, model::Float8Scaling::rowwise,
                             model::Float8Scaling::rowwise_with_gw_hp, model::Float8Scaling::blockwise}) {
    INFO(to_string(scaling));
    const model::Float8Recipe recipe{scaling, c10::ScalarType::Float8_e4m3fn};
    // Without autocast, on the input rounded to bf16 first: what the autocast run must compute.
    const auto x16 = c.x.to(torch::kBFloat16).requires_grad_(true);
    const auto w16 = c.weight.clone().requires_grad_(true);
    const auto y16 = model::float8_linear(x16, w16, {}, recipe);
    (y16.to(torch::kFloat32) * c.grad_out).sum().backward();

    const auto x = c.x.clone().requires_grad_(true);
    const auto w = c.weight.clone().requires_grad_(true);
    torch::Tensor y;
    {
      at::autocast::set_autocast_dtype(c10::DeviceType::CPU, at::kBFloat16);
      at::autocast::set_autocast_enabled(c10::DeviceType::CPU, true);
      y = model::float8_linear(x, w, {}, recipe);
      at::autocast::set_autocast_enabled(c10::DeviceType::CPU, false);
      at::autocast::clear_cache();
    }
    CHECK(y.scalar_type() == torch::kBFloat16);
    CHECK(torch::equal(y, y16));
    (y.to(torch::kFloat32) * c.grad_out).sum().backward();
    CHECK(x.grad().scalar_type() == torch::kFloat32);
    CHECK(torch::equal(x.grad(), x16.grad().to(torch::kFloat32)));
    CHECK(torch::equal(w.grad(), w16.grad()));
  }
}

TEST_CASE("blockwise FP8 quantizes DeepSeek-V3's tiles and blocks byte for byte", "[model][float8]") {
  const auto c = linear_case(200, 320, 192);  // partial tiles and blocks at every edge
  const auto golden = run_reference("float8_blockwise.py", c);
  const auto blocks = model::scaling_blocks(model::Float8Scaling::blockwise);
  const auto e4m3 = c10::ScalarType::Float8_e4m3fn;
  const std::vector<std::tuple<std::string, torch::Tensor, model::ScaleBlock>> operands = {
      {"forward.x", c.x, blocks.forward.a},
      {"forward.weight", c.weight, blocks.forward.b},
      {"input_grad.grad_out", c.grad_out, blocks.input_grad.a},
      {"weight_grad.grad_out", c.grad_out, blocks.weight_grad.a},
      {"weight_grad.x", c.x, blocks.weight_grad.b}};
  for (const auto& [name, tensor, block] : operands) {
    INFO(name);
    const auto q = model::quantize_float8(tensor, e4m3, block, false);
    CHECK(torch::equal(q.data.view(torch::kUInt8), golden.at(name + ".bytes")));
    CHECK(torch::equal(q.scale.expand_as(tensor), golden.at(name + ".scales")));
  }
  const auto result = run_layer(c, {model::Float8Scaling::blockwise, e4m3});
  double worst = 0;
  for (const auto& [name, tensor] : {std::pair<std::string, torch::Tensor>{"y", result.y},
                                     {"grad_x", result.grad_x}, {"grad_weight", result.grad_weight}}) {
    INFO(name);
    const double error = testing::max_relative_error(tensor, golden.at(name));
    CHECK(error <= 1e-6);
    worst = std::max(worst, error);
  }
  WARN("worst relative error against the blockwise reference: " << worst);
}

TEST_CASE("FP8 scales: saturation, power-of-two rounding and empty operands", "[model][float8]") {
  const auto e4m3 = c10::ScalarType::Float8_e4m3fn;
  const auto x = torch::tensor({{1.0f, -2.0f}, {4.0f, 0.5f}});
  const auto q = model::quantize_float8(x, e4m3, {}, false);
  CHECK(q.scale.item<float>() == static_cast<float>(448.0 / 4.0));
  CHECK(q.data.to(torch::kFloat32).abs().max().item<float>() == 448.0f);
  // Scales given from elsewhere are used as they are, and out-of-range values saturate.
  const auto tight = model::quantize_float8(x, e4m3, {}, false, torch::full({1, 1}, 448.0f));
  CHECK(tight.data.to(torch::kFloat32).abs().max().item<float>() == 448.0f);
  const auto rows = model::quantize_float8(x, e4m3, {1, 0}, true);
  // 448 / 2 = 224 and 448 / 4 = 112, rounded down to powers of two.
  CHECK(torch::equal(rows.scale.squeeze(1), torch::tensor({128.0f, 64.0f})));
  const auto empty = model::quantize_float8(torch::zeros({0, 8}), e4m3, {}, false);
  CHECK(empty.data.size(0) == 0);
}

TEST_CASE("an FSDP unit gathers its FP8 weights as the one-process layer quantizes them", "[parallel][float8]") {
  const auto scaling = GENERATE(model::Float8Scaling::tensorwise, model::Float8Scaling::blockwise);
  const int64_t ranks = GENERATE(2, 3);
  INFO(to_string(scaling) << " over " << ranks << " ranks");
  const auto block = model::scaling_blocks(scaling).forward.b;
  torch::manual_seed(3);
  // A norm gain between two weights, and a stack of experts: the shards cut across all of them.
  const auto dense = torch::randn({160, 136}) * torch::exp(torch::linspace(-2, 2, 136));
  const auto gain = torch::randn({136});
  const auto experts = torch::randn({3, 72, 136});
  auto comms = parallel::make_thread_comms(ranks, "fsdp");
  std::vector<torch::Tensor> gathered_dense(static_cast<size_t>(ranks)), gathered_experts(static_cast<size_t>(ranks));
  std::vector<torch::Tensor> dense_scales(static_cast<size_t>(ranks)), expert_scales(static_cast<size_t>(ranks));
  std::vector<torch::Tensor> gathered_gain(static_cast<size_t>(ranks));
  std::vector<int64_t> received(static_cast<size_t>(ranks));
  const auto errors = testing::run_ranks(ranks, [&](int64_t rank) {
    auto w = dense.clone(), g = gain.clone(), e = experts.clone();
    parallel::ShardUnit unit("block", {{"w", w}, {"g", g}, {"e", e}}, comms[static_cast<size_t>(rank)],
                             parallel::make_single_process_comm("dp"), {}, {}, {{"w", block}, {"e", block}});
    unit.wait_gather();
    const auto r = static_cast<size_t>(rank);
    gathered_dense[r] = w.detach().clone();
    gathered_gain[r] = g.detach().clone();
    gathered_experts[r] = e.detach().clone();
    dense_scales[r] = model::gathered_float8_scales(w).clone();
    expert_scales[r] = model::gathered_float8_scales(e).clone();
    received[r] = unit.gathered_bytes();
    unit.reshard();
    CHECK_FALSE(model::gathered_float8_scales(w).defined());
  });
  for (const auto& error : errors) REQUIRE(error.empty());
  const auto e4m3 = c10::ScalarType::Float8_e4m3fn;
  const auto one_process = model::quantize_float8(dense, e4m3, block, false);
  for (int64_t rank = 0; rank < ranks; ++rank) {
    const auto r = static_cast<size_t>(rank);
    INFO("rank " << rank);
    CHECK(torch::equal(gathered_dense[r], one_process.dequantize()));
    CHECK(torch::equal(gathered_gain[r], gain));
    // The layer requantizes the gathered weight with the gathered scales: the same bytes.
    const auto again = model::quantize_float8(gathered_dense[r], e4m3, block, false, dense_scales[r]);
    CHECK(torch::equal(again.data.view(torch::kUInt8), one_process.data.view(torch::kUInt8)));
    for (int64_t expert = 0; expert < 3; ++expert) {
      const auto mine = model::quantize_float8(experts[expert], e4m3, block, false);
      CHECK(torch::equal(gathered_experts[r][expert], mine.dequantize()));
      CHECK(torch::equal(model::spread_block_scales(expert_scales[r][expert], 72, 136, block).expand({72, 136}),
                         mine.scale.expand({72, 136})));
    }
    // fp8 bytes for the weights, fp32 for the gain, and the amaxes: about a quarter of fp32.
    const int64_t fp32_bytes = (ranks - 1) * (dense.numel() + gain.numel() + experts.numel()) * 4 / ranks;
    CHECK(received[r] < fp32_bytes * 3 / 10);
  }
}
