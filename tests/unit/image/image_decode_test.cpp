// Image decoding against Pillow: every generated PNG and JPEG (tools/reference/make_test_images.py)
// decodes to the pixels of Image.open(path).convert("RGB"), and its transparency to
// convert("RGBA")'s alpha; broken files are InputErrors that name the file.
#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>

#include <fmt/format.h>
#include <torch/torch.h>

#include "image/image_decode.h"
#include "image/image_reference.h"
#include "scratch_dir.h"
#include "util/input_error.h"

using namespace xtrain;
using Catch::Matchers::Contains;

namespace {

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string generated_image(const std::string& name) {
  for (const auto& path : testing::image_reference().images)
    if (testing::file_name(path) == name) return path;
  throw std::runtime_error("no generated image " + name);
}

}  // namespace

TEST_CASE("decoded PNG and JPEG pixels equal Pillow's convert(\"RGB\"), transparency its RGBA alpha", "[image]") {
  const auto& reference = testing::image_reference();
  REQUIRE(reference.images.size() >= 40);
  int exact = 0;
  for (const auto& path : reference.images) {
    const std::string name = testing::file_name(path);
    INFO(name);
    const image::Image image = image::decode_image_file(path);
    const auto& expected = reference.at("decoded/" + name);
    REQUIRE(expected.sizes() == torch::IntArrayRef({image.height, image.width, 3}));
    const auto decoded = torch::from_blob(const_cast<uint8_t*>(image.rgb.data()), {image.height, image.width, 3}, torch::kUInt8);
    const int64_t max_diff = (decoded.to(torch::kInt32) - expected.to(torch::kInt32)).abs().max().item<int64_t>();
    // libjpeg-turbo's ISLOW IDCT and fancy upsampling are exact integer algorithms, the same in
    // Debian's 2.1 as in the 3.x Pillow bundles, so JPEGs are held to exactness like PNGs.
    CHECK(max_diff == 0);
    exact += max_diff == 0;
    const bool alpha_expected = reference.has("alpha/" + name);
    CHECK(image.has_alpha() == alpha_expected);
    bool alpha_exact = true;
    if (alpha_expected && image.has_alpha()) {
      const auto alpha = torch::from_blob(const_cast<uint8_t*>(image.alpha.data()), {image.height, image.width}, torch::kUInt8);
      alpha_exact = torch::equal(alpha, reference.at("alpha/" + name));
      CHECK(alpha_exact);
    }
    fmt::print("image decode {:<34} {:>4} x {:<4} max |diff| vs Pillow {}{}\n", name, image.width, image.height, max_diff,
               alpha_expected ? (alpha_exact ? ", alpha exact" : ", alpha DIFFERS") : "");
  }
  fmt::print("image decode: {} of {} files exactly equal to Pillow's\n", exact, reference.images.size());
}

TEST_CASE("an image is told apart by its bytes, not its name, and decodes from memory alike", "[image]") {
  const std::string png_named_jpg = generated_image("png_named_jpg_200x300.jpg");
  const std::string bytes = file_bytes(png_named_jpg);
  const auto from_memory =
      image::decode_image(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "member.jpg");
  const auto from_file = image::decode_image_file(png_named_jpg);
  CHECK(from_memory.width == 200);
  CHECK(from_memory.height == 300);
  CHECK(from_memory.rgb == from_file.rgb);
}

TEST_CASE("broken image files are InputErrors naming the file and the problem", "[image]") {
  testing::ScratchDir dir;
  const std::string png = file_bytes(generated_image("rgb_640x480.png"));
  const std::string jpeg = file_bytes(generated_image("jpeg420_640x480.jpg"));

  const std::string half_png = dir.write("half.png", png.substr(0, png.size() / 2));
  CHECK_THROWS_AS(image::decode_image_file(half_png), InputError);
  CHECK_THROWS_WITH(image::decode_image_file(half_png), Contains(half_png) && Contains("truncated PNG"));

  const std::string half_jpeg = dir.write("half.jpg", jpeg.substr(0, jpeg.size() / 2));
  CHECK_THROWS_WITH(image::decode_image_file(half_jpeg), Contains(half_jpeg) && Contains("truncated JPEG"));

  const std::string empty = dir.write("empty.png", "");
  CHECK_THROWS_WITH(image::decode_image_file(empty), Contains(empty) && Contains("file is empty"));

  const std::string text = dir.write("notes.png", "these are notes, not pixels\n");
  CHECK_THROWS_WITH(image::decode_image_file(text),
                    Contains(text) && Contains("not a PNG or JPEG image") && Contains("74 68 65 73"));

  const std::string missing = (dir.path() / "missing.png").string();
  CHECK_THROWS_WITH(image::decode_image_file(missing), Contains(missing) && Contains("No such file"));

  // A flipped byte inside the compressed image data: libpng meets it before the chunk's CRC.
  std::string flipped = png;
  flipped[png.size() / 2] = static_cast<char>(flipped[png.size() / 2] ^ 0x55);
  const std::string bad_data = dir.write("bad_data.png", flipped);
  CHECK_THROWS_WITH(image::decode_image_file(bad_data), Contains(bad_data) && Contains("corrupt PNG"));

  // A flipped byte in the header (IHDR's width): its CRC no longer matches.
  flipped = png;
  flipped[18] = static_cast<char>(flipped[18] ^ 0x01);
  const std::string bad_crc = dir.write("bad_crc.png", flipped);
  CHECK_THROWS_WITH(image::decode_image_file(bad_crc), Contains(bad_crc) && Contains("corrupt PNG") && Contains("CRC"));

  // A JPEG whose frame header (SOF0) is too short to hold one.
  const std::string bad_jpeg = dir.write("garbled.jpg", std::string("\xff\xd8\xff\xc0\x00\x03", 6) + std::string(64, 'x'));
  CHECK_THROWS_WITH(image::decode_image_file(bad_jpeg), Contains(bad_jpeg) && Contains("corrupt JPEG"));

  // From memory, the message names what the caller calls it.
  CHECK_THROWS_WITH(image::decode_image(reinterpret_cast<const uint8_t*>(png.data()), 100, "shard-3.tar:cat.png"),
                    Contains("shard-3.tar:cat.png: truncated PNG"));
}
