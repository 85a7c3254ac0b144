// Quantized weights read as the floats they stand for: whole and in any slice (as FSDP's ranks
// read their pieces), with short blocks at the end of a side, stacked matrices and e8m0 scales.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "ckpt/quantized_weights.h"
#include "ckpt/safetensors.h"
#include "scratch_dir.h"
#include "util/input_error.h"

using namespace xtrain;

namespace {

ckpt::FolderTensors open(const std::string& path) {
  ckpt::FolderTensors tensors;
  auto reader = std::make_shared<ckpt::SafetensorsReader>(path);
  for (const auto& entry : reader->entries()) tensors[entry.name] = {reader, &entry};
  return tensors;
}

// The tensor read whole, and in slices that cross rows, blocks and matrices, equals `expected`.
void check_reads(const ckpt::WeightTensor& tensor, const torch::Tensor& expected) {
  REQUIRE(tensor.shape == expected.sizes().vec());
  const auto flat = expected.reshape({-1});
  CHECK(torch::equal(tensor.read(0, flat.numel()), flat));
  for (const auto& [begin, count] : std::vector<std::pair<int64_t, int64_t>>{
           {0, 1}, {7, 300}, {135, 137}, {1000, 30000}, {flat.numel() - 5, 5}, {27199, 27202}, {50, 0}}) {
    INFO("slice " << begin << " + " << count);
    CHECK(torch::equal(tensor.read(begin, count), flat.narrow(0, begin, count)));
  }
}

}  // namespace

TEST_CASE("fp8 weights read as float32(q) times their block's scale, short blocks included", "[ckpt][quantized]") {
  testing::ScratchDir scratch;
  const auto path = (scratch.path() / "model.safetensors").string();
  torch::manual_seed(3);
  // Three stacked matrices of 200 x 136: blocks of 128 x 128 leave a short last block each way.
  const auto q = (torch::randn({3, 200, 136}) * 100).clamp(-448, 448).to(torch::kFloat8_e4m3fn);
  const auto scales = torch::rand({3, 2, 2}) * 0.01 + 0.001;
  const auto bytes = torch::randint(110, 140, {3, 2, 2}).to(torch::kUInt8);
  ckpt::save_safetensors(path, {{"a.weight", q}, {"a.weight_scale_inv", scales}, {"b.weight", q},
                                {"b.weight_scale_inv", bytes}, {"norm.weight", torch::ones({136})}});
  ckpt::Quantization fp8;
  fp8.method = ckpt::Quantization::Method::fp8;
  fp8.source = "config.json";
  const auto tensors = ckpt::weight_tensors(open(path), fp8);
  REQUIRE(tensors.size() == 3);  // the scales are taken in by their weights
  const auto expand = [](const torch::Tensor& s) {
    return s.repeat_interleave(128, 1).narrow(1, 0, 200).repeat_interleave(128, 2).narrow(2, 0, 136);
  };
  check_reads(tensors.at("a.weight"), q.to(torch::kFloat32) * expand(scales));
  // U8 scales are e8m0 exponents, 2^(byte - 127).
  check_reads(tensors.at("b.weight"), q.to(torch::kFloat32) * expand(torch::exp2(bytes.to(torch::kFloat32) - 127)));
  CHECK(tensors.at("a.weight").dequantized);
  CHECK_FALSE(tensors.at("norm.weight").dequantized);
  CHECK_NOTHROW(ckpt::check_floating("a.weight", tensors.at("a.weight"), fp8));

  // The same F8_E4M3 tensor read without fp8 in config.json is refused, not read unscaled.
  const auto plain = ckpt::weight_tensors(open(path), ckpt::Quantization{});
  CHECK_THROWS_WITH(ckpt::check_floating("a.weight", plain.at("a.weight"), ckpt::Quantization{}),
                    Catch::Contains("tensor 'a.weight' is F8_E4M3 without scales"));
  CHECK_THROWS_WITH(ckpt::check_floating("b.weight_scale_inv", plain.at("b.weight_scale_inv"), ckpt::Quantization{}),
                    Catch::Contains("tensor 'b.weight_scale_inv' is U8, but the model's parameter it holds is floating"));

  // Scales for blocks of 64 x 64 do not fit blocks of 128 x 128.
  ckpt::save_safetensors(path, {{"a.weight", q}, {"a.weight_scale_inv", torch::ones({3, 4, 3})}});
  CHECK_THROWS_WITH(ckpt::weight_tensors(open(path), fp8),
                    Catch::Contains("tensor 'a.weight_scale_inv' has shape [3, 4, 3]; the block scales of 'a.weight' "
                                    "([3, 200, 136] in " + path + ") in blocks of 128x128 "
                                    "(quantization_config.weight_block_size) have shape [3, 2, 2]"));
}

TEST_CASE("mxfp4 blocks read as transformers' FP4 table times 2^(scale - 127), transposed", "[ckpt][quantized]") {
  testing::ScratchDir scratch;
  const auto path = (scratch.path() / "model.safetensors").string();
  torch::manual_seed(4);
  // 2 experts, 300 rows of 4 blocks of 32 values: [2, 128, 300] once dequantized.
  const auto blocks = torch::randint(0, 256, {2, 300, 4, 16}).to(torch::kUInt8);
  const auto scales = torch::randint(115, 135, {2, 300, 4}).to(torch::kUInt8);
  ckpt::save_safetensors(path, {{"e.down_proj_blocks", blocks}, {"e.down_proj_scales", scales},
                                {"e.down_proj_bias", torch::zeros({2, 300})}});
  ckpt::Quantization mxfp4;
  mxfp4.method = ckpt::Quantization::Method::mxfp4;
  const auto tensors = ckpt::weight_tensors(open(path), mxfp4);
  REQUIRE(tensors.size() == 2);
  const auto table = torch::tensor({+0.0f, +0.5f, +1.0f, +1.5f, +2.0f, +3.0f, +4.0f, +6.0f, -0.0f, -0.5f, -1.0f,
                                    -1.5f, -2.0f, -3.0f, -4.0f, -6.0f});
  const auto low = table.index({torch::bitwise_and(blocks, 15).to(torch::kLong)});
  const auto high = table.index({torch::bitwise_right_shift(blocks, 4).to(torch::kLong)});
  const auto values = torch::stack({low, high}, -1).reshape({2, 300, 4, 32});
  const auto expected = (values * torch::exp2(scales.to(torch::kFloat32) - 127).unsqueeze(-1))
                            .reshape({2, 300, 128})
                            .transpose(1, 2);
  check_reads(tensors.at("e.down_proj"), expected);
}

TEST_CASE("a quantization_config xtrain cannot dequantize is named", "[ckpt][quantized]") {
  const auto config = [](const char* text) { return nlohmann::json::parse(text); };
  CHECK(ckpt::folder_quantization(config(R"({"model_type": "llama"})"), "c.json").method ==
        ckpt::Quantization::Method::none);
  const auto fp8 = ckpt::folder_quantization(
      config(R"({"quantization_config": {"quant_method": "fp8", "weight_block_size": [64, 32]}})"), "c.json");
  CHECK(fp8.method == ckpt::Quantization::Method::fp8);
  CHECK(fp8.block == std::array<int64_t, 2>{64, 32});
  CHECK_THROWS_WITH(ckpt::folder_quantization(config(R"({"quantization_config": {"quant_method": "gptq"}})"), "c.json"),
                    Catch::StartsWith("c.json: quantization_config.quant_method is \"gptq\": xtrain dequantizes"));
  CHECK_THROWS_WITH(
      ckpt::folder_quantization(config(R"({"quantization_config": {"quant_method": "fp8", "weight_block_size": [0, 128]}})"),
                                "c.json"),
      Catch::StartsWith("c.json: quantization_config.weight_block_size is [0,128]; it must be two positive integers"));
  CHECK_THROWS_WITH(ckpt::folder_quantization(
                        config(R"({"quantization_config": {"quant_method": "fp8", "expert_dtype": "fp4"}})"), "c.json"),
                    Catch::Contains("quantization_config.expert_dtype is \"fp4\""));
  CHECK_THROWS_AS(ckpt::folder_quantization(config(R"({"quantization_config": "fp8"})"), "c.json"), InputError);
}
