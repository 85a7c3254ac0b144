#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "scratch_dir.h"
#include "ckpt/safetensors.h"
#include "util/input_error.h"

// Last: c10's logging header defines its own CHECK macro, which Catch's must replace.
#include <catch2/catch.hpp>

using xtrain::InputError;
using xtrain::ckpt::load_safetensors;
using xtrain::ckpt::save_safetensors;
using xtrain::ckpt::TensorMap;
using xtrain::testing::ScratchDir;

namespace {

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string le64(uint64_t value) {
  std::string bytes(8, '\0');
  std::memcpy(bytes.data(), &value, 8);
  return bytes;
}

// A file with the given header text (its length prefix computed) followed by data.
std::string raw_file(const std::string& header, const std::string& data = "") {
  return le64(header.size()) + header + data;
}

// Bit-exact comparison: torch::equal treats NaN != NaN and -0.0 == 0.0.
bool same_bits(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  const torch::Tensor ca = a.contiguous();
  const torch::Tensor cb = b.contiguous();
  return ca.nbytes() == cb.nbytes() && std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

torch::Tensor sample(torch::ScalarType type, torch::IntArrayRef shape) {
  const auto options = torch::TensorOptions().dtype(type);
  if (type == torch::kBool) return torch::randint(0, 2, shape, options);
  if (torch::isFloatingType(type)) return torch::randn(shape, options);
  if (type == torch::kByte) return torch::randint(0, 256, shape, options);
  if (type == torch::kChar) return torch::randint(-128, 128, shape, options);
  return torch::randint(-30000, 30000, shape, options);
}

std::string scalar_name(torch::ScalarType type) { return c10::toString(type); }

}  // namespace

TEST_CASE("every dtype round-trips bit-exactly", "[ckpt]") {
  ScratchDir dir;
  const std::string path = (dir.path() / "model.safetensors").string();
  torch::manual_seed(0);
  for (const torch::ScalarType type :
       {torch::kDouble, torch::kFloat, torch::kHalf, torch::kBFloat16, torch::kLong, torch::kInt,
        torch::kShort, torch::kChar, torch::kByte, torch::kBool}) {
    INFO(scalar_name(type));
    TensorMap tensors{
        {"matrix", sample(type, {3, 5})},
        {"scalar", sample(type, {})},
        {"empty", sample(type, {0, 4})},
        {"transposed", sample(type, {4, 6}).t()},
        {"strided", sample(type, {10}).slice(0, 1, 10, 3)},
    };
    REQUIRE_FALSE(tensors["transposed"].is_contiguous());
    if (torch::isFloatingType(type)) {
      // Special values must survive as bits, not just as numbers.
      tensors["specials"] = torch::tensor({0.0, -0.0, std::numeric_limits<double>::infinity(),
                                           std::numeric_limits<double>::quiet_NaN()})
                                .to(type);
    }
    save_safetensors(path, tensors);
    const auto loaded = load_safetensors(path);
    REQUIRE(loaded.tensors.size() == tensors.size());
    CHECK(loaded.metadata.empty());
    for (const auto& [name, tensor] : tensors) {
      INFO(name);
      REQUIRE(loaded.tensors.count(name) == 1);
      const torch::Tensor& got = loaded.tensors.at(name);
      CHECK(same_bits(got, tensor));
      CHECK(got.device().is_cpu());
      CHECK(got.is_contiguous());
    }
    CHECK(loaded.tensors.at("scalar").dim() == 0);
  }
}

TEST_CASE("loaded tensors own their memory", "[ckpt]") {
  ScratchDir dir;
  const std::string path = (dir.path() / "model.safetensors").string();
  save_safetensors(path, {{"a", torch::ones({2, 3})}, {"b", torch::zeros({4})}});
  const auto loaded = load_safetensors(path);
  // Each tensor has a storage of exactly its own size, not a view into one file buffer.
  for (const auto& [name, tensor] : loaded.tensors) {
    INFO(name);
    CHECK(tensor.storage().nbytes() == tensor.nbytes());
    CHECK(tensor.storage_offset() == 0);
  }
}

TEST_CASE("metadata round-trips and is omitted when empty", "[ckpt]") {
  ScratchDir dir;
  const std::string path = (dir.path() / "model.safetensors").string();
  const xtrain::ckpt::Metadata metadata{
      {"format", "pt"}, {"step", "1200"}, {"note", "ünïcode \"q\""}};
  save_safetensors(path, {{"w", torch::ones({2})}}, metadata);
  CHECK(load_safetensors(path).metadata == metadata);

  save_safetensors(path, {{"w", torch::ones({2})}});
  CHECK(read_bytes(path).find("__metadata__") == std::string::npos);
  CHECK(load_safetensors(path).metadata.empty());
}

TEST_CASE("a file with no tensors is valid", "[ckpt]") {
  ScratchDir dir;
  const std::string path = (dir.path() / "empty.safetensors").string();
  save_safetensors(path, {});
  CHECK(read_bytes(path) == le64(8) + "{}      ");
  CHECK(load_safetensors(path).tensors.empty());
}

TEST_CASE("the written bytes match the format byte for byte", "[ckpt]") {
  ScratchDir dir;
  const std::string path = (dir.path() / "a.safetensors").string();
  const std::string data("\x00\x00\x80\x3f\x00\x00\x00\x40", 8);  // 1.0f, 2.0f little-endian

  save_safetensors(path, {{"a", torch::tensor({{1.0f, 2.0f}})}});
  // 56 bytes of JSON: already a multiple of 8, so no padding.
  CHECK(read_bytes(path) ==
        le64(56) + R"({"a":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]}})" + data);

  save_safetensors(path, {{"a", torch::tensor({{1.0f, 2.0f}})}}, {{"format", "pt"}});
  // 87 bytes of JSON, padded with one space to 88.
  CHECK(read_bytes(path) ==
        le64(88) +
            R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]}} )" +
            data);
}

TEST_CASE("the header is padded and lists tensors contiguously in name order", "[ckpt]") {
  ScratchDir dir;
  const std::string path = (dir.path() / "model.safetensors").string();
  save_safetensors(path, {{"z.bias", torch::zeros({3}, torch::kHalf)},
                          {"a.weight", torch::zeros({2, 2}, torch::kDouble)},
                          {"m.flag", torch::zeros({}, torch::kBool)}},
                   {{"k", "v"}});
  const std::string bytes = read_bytes(path);
  uint64_t header_length = 0;
  std::memcpy(&header_length, bytes.data(), 8);
  CHECK(header_length % 8 == 0);
  const nlohmann::json header = nlohmann::json::parse(bytes.substr(8, header_length));
  CHECK(header["__metadata__"] == nlohmann::json{{"k", "v"}});
  CHECK(header["a.weight"] ==
        nlohmann::json{{"dtype", "F64"}, {"shape", {2, 2}}, {"data_offsets", {0, 32}}});
  CHECK(header["m.flag"] ==
        nlohmann::json{
            {"dtype", "BOOL"}, {"shape", nlohmann::json::array()}, {"data_offsets", {32, 33}}});
  CHECK(header["z.bias"] ==
        nlohmann::json{{"dtype", "F16"}, {"shape", {3}}, {"data_offsets", {33, 39}}});
  CHECK(bytes.size() == 8 + header_length + 39);
}

TEST_CASE("save rejects tensors it cannot represent", "[ckpt]") {
  ScratchDir dir;
  const std::string path = (dir.path() / "model.safetensors").string();
  CHECK_THROWS_AS(save_safetensors(path, {{"c", torch::zeros({2}, torch::kComplexFloat)}}),
                  std::invalid_argument);
  CHECK_THROWS_AS(save_safetensors(path, {{"u", torch::Tensor()}}), std::invalid_argument);
  CHECK_THROWS_AS(save_safetensors(path, {{"__metadata__", torch::zeros({1})}}),
                  std::invalid_argument);
}

TEST_CASE("save accepts tensors that require grad", "[ckpt]") {
  ScratchDir dir;
  const std::string path = (dir.path() / "model.safetensors").string();
  const torch::Tensor weight = torch::randn({3, 3}, torch::requires_grad());
  save_safetensors(path, {{"w", weight}});
  const torch::Tensor loaded = load_safetensors(path).tensors.at("w");
  CHECK(same_bits(loaded, weight.detach()));
  CHECK_FALSE(loaded.requires_grad());
}

TEST_CASE("malformed files are InputErrors that say what is wrong", "[ckpt]") {
  ScratchDir dir;
  const auto load = [&](const std::string& contents) {
    load_safetensors(dir.write("bad.safetensors", contents));
  };
  const std::string prefix = (dir.path() / "bad.safetensors").string() + ": ";
  const std::string f32_entry = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";

  SECTION("missing file") {
    const std::string missing = (dir.path() / "missing.safetensors").string();
    CHECK_THROWS_WITH(load_safetensors(missing),
                      "cannot read " + missing + ": No such file or directory");
    CHECK_THROWS_AS(load_safetensors(missing), InputError);
  }
  SECTION("shorter than the length prefix") {
    CHECK_THROWS_WITH(load("abc"),
                      prefix + "truncated: 3 bytes, too short for the 8-byte header length");
    CHECK_THROWS_AS(load(""), InputError);
  }
  SECTION("header length beyond the end of the file") {
    CHECK_THROWS_WITH(load(le64(1000) + "{}"),
                      prefix + "truncated or not a safetensors file: header length says 1000 "
                               "bytes, file has 2 after the 8-byte length");
    CHECK_THROWS_AS(load(le64(std::numeric_limits<uint64_t>::max())), InputError);
  }
  SECTION("invalid JSON") {
    CHECK_THROWS_WITH(load(raw_file("{\"a\":")),
                      Catch::StartsWith(prefix + "invalid JSON header: ") &&
                          Catch::Contains("parse error"));
    CHECK_THROWS_WITH(load(raw_file("[1, 2]")),
                      prefix + "the JSON header must be an object, got array");
  }
  SECTION("tensor data missing from the end") {
    CHECK_THROWS_WITH(load(raw_file(f32_entry, "1234")),
                      prefix + "truncated: header says 8 bytes of tensor data, file has 4");
  }
  SECTION("unknown dtype") {
    CHECK_THROWS_WITH(
        load(raw_file(R"({"a":{"dtype":"F8_E8M0","shape":[1],"data_offsets":[0,1]}})", "x")),
        prefix + "tensor 'a': unsupported dtype \"F8_E8M0\" "
                 "(supported: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL F8_E4M3 F8_E5M2)");
  }
  SECTION("shape does not match the data offsets") {
    CHECK_THROWS_WITH(
        load(raw_file(R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})",
                      std::string(20, '\0'))),
        prefix + "tensor 'a': shape [2, 3] of F32 does not match data_offsets [0,20] (20 bytes)");
    // A shape whose byte size overflows 64 bits must not wrap around to a match.
    CHECK_THROWS_WITH(
        load(raw_file(R"({"a":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,0]}})")),
        Catch::Contains("does not match data_offsets"));
  }
  SECTION("ill-formed entries") {
    CHECK_THROWS_WITH(load(raw_file(R"({"a":{"dtype":"F32","shape":[2]}})")),
                      prefix + "tensor 'a': missing \"data_offsets\"");
    CHECK_THROWS_WITH(load(raw_file(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})",
                                    std::string(8, '\0'))),
                      prefix + "tensor 'a': shape must hold non-negative integers, got [-2]");
    CHECK_THROWS_WITH(load(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})",
                                    std::string(8, '\0'))),
                      prefix + "tensor 'a': data_offsets must be [begin, end] with 0 <= begin <= "
                               "end, got [8,0]");
    CHECK_THROWS_WITH(load(raw_file(R"({"a":[1]})")),
                      prefix + "tensor 'a': entry must be an object, got array");
  }
  SECTION("metadata that is not strings") {
    CHECK_THROWS_WITH(load(raw_file(R"({"__metadata__":{"step":12}})")),
                      prefix + "__metadata__ value for 'step' must be a string, got 12");
  }
  SECTION("BOOL bytes other than 0 and 1") {
    CHECK_THROWS_WITH(
        load(raw_file(R"({"b":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", "\x01\x07")),
        prefix + "tensor 'b': BOOL data holds bytes other than 0 and 1");
  }
  SECTION("a directory") {
    CHECK_THROWS_WITH(load_safetensors(dir.path().string()),
                      dir.path().string() + ": not a regular file");
  }
}

TEST_CASE("files from other writers load: unpadded headers and trailing bytes", "[ckpt]") {
  ScratchDir dir;
  // Hand-written: an unpadded header, data in reverse name order, 3 spare bytes at the end.
  const std::string header = R"({"b":{"dtype":"I16","shape":[1],"data_offsets":[0,2]},)"
                             R"("a":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})";
  const std::string data("\x05\x01\x07\x09zzz", 7);
  const std::string path = dir.write("x.safetensors", raw_file(header, data));
  const auto loaded = load_safetensors(path);
  CHECK(loaded.tensors.at("b").item<int16_t>() == 0x0105);
  CHECK(torch::equal(loaded.tensors.at("a"), torch::tensor({7, 9}, torch::kByte)));
}
