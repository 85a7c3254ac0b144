// CLIP preprocessing against transformers' PIL-based CLIP image processor
// (tools/reference/clip_preprocess.py), for every generated image under each config of
// image_reference.h: the 8-bit pixels after RGB conversion, resize and crop within 1/255, the
// final pixel values within (1/255) / min(std) + 1e-5; and the config file's forms and errors.
#include <catch2/catch.hpp>

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "data/pixel_tensor.h"
#include "image/clip_image_processor.h"
#include "image/image_decode.h"
#include "image/image_reference.h"
#include "scratch_dir.h"
#include "util/input_error.h"

using namespace xtrain;
using Catch::Matchers::Contains;

TEST_CASE("CLIP preprocessing matches transformers' PIL-based CLIP image processor", "[image]") {
  const auto& reference = testing::image_reference();
  testing::ScratchDir dir;
  for (const auto& [config_name, config_json] : testing::image_configs()) {
    INFO("config " << config_name);
    const auto config = image::load_clip_image_processor_config(dir.write(config_name + ".json", config_json));
    const double bound = 1.0 / 255 / *std::min_element(config.image_std.begin(), config.image_std.end()) + 1e-5;
    int64_t max_pixel_diff = 0, values_differing = 0, values = 0;
    double max_value_diff = 0;
    std::string worst_image = "-";
    std::vector<int64_t> output_size;
    for (const auto& path : reference.images) {
      const std::string name = testing::file_name(path);
      INFO(name);
      const auto image = image::decode_image_file(path);
      const auto resized = testing::channels_first(image::clip_resize_and_crop(image, config));
      const auto& expected = reference.at(config_name + "/resized/" + name);
      REQUIRE(resized.sizes() == expected.sizes());
      const auto diff = (resized.to(torch::kInt32) - expected.to(torch::kInt32)).abs();
      const int64_t pixel_diff = diff.max().item<int64_t>();
      CHECK(pixel_diff <= 1);
      values_differing += diff.gt(0).sum().item<int64_t>();
      values += diff.numel();

      const auto pixel_values = data::pixel_tensor(image::preprocess(image, config));
      const auto& expected_values = reference.at(config_name + "/pixel_values/" + name);
      REQUIRE(pixel_values.sizes() == expected_values.sizes());
      REQUIRE(pixel_values.scalar_type() == torch::kFloat32);
      if (output_size.empty()) output_size = pixel_values.sizes().vec();
      if (pixel_values.sizes().vec() != output_size) output_size = {3, 0, 0};  // differs by image
      const double value_diff = (pixel_values.to(torch::kFloat64) - expected_values.to(torch::kFloat64)).abs().max().item<double>();
      CHECK(value_diff <= bound);
      if (pixel_diff > max_pixel_diff || (pixel_diff == max_pixel_diff && value_diff > max_value_diff)) worst_image = name;
      max_pixel_diff = std::max(max_pixel_diff, pixel_diff);
      max_value_diff = std::max(max_value_diff, value_diff);
    }
    fmt::print("clip preprocess {:<13} {} images to {}x{}: uint8 after resize+crop max |diff| {} ({:.4f}% of values differ), "
               "pixel values max |diff| {:.3g} (bound {:.4f}), worst {}\n",
               config_name, reference.images.size(), output_size.at(1), output_size.at(2), max_pixel_diff,
               100.0 * values_differing / std::max<int64_t>(values, 1), max_value_diff, bound, worst_image);
  }
}

TEST_CASE("the resize keeps the shortest edge as transformers rounds it", "[image]") {
  image::ClipImageProcessorConfig config;  // shortest_edge 224
  using Size = std::pair<int64_t, int64_t>;
  CHECK(image::clip_resize_size(224, 224, config) == Size{224, 224});
  CHECK(image::clip_resize_size(200, 300, config) == Size{224, 336});
  CHECK(image::clip_resize_size(300, 200, config) == Size{336, 224});
  CHECK(image::clip_resize_size(480, 640, config) == Size{224, 298});  // 298.67, truncated
  CHECK(image::clip_resize_size(131, 97, config) == Size{302, 224});   // 302.51
  CHECK(image::clip_resize_size(50, 1000, config) == Size{224, 4480});
  config.shortest_edge = 336;
  CHECK(image::clip_resize_size(427, 640, config) == Size{336, 503});  // 503.61
  config.resize_height = 256;
  config.resize_width = 192;
  CHECK(image::clip_resize_size(427, 640, config) == Size{256, 192});
}

TEST_CASE("an image smaller than the crop is zero-padded, its extra row or column after it", "[image]") {
  image::Image image{2, 3, std::vector<uint8_t>(2 * 3 * 3, 200), {}};
  image::ClipImageProcessorConfig config;
  config.do_resize = false;
  config.crop_height = 6;  // 3 rows of padding: 2 above (ceil), 1 below
  config.crop_width = 5;   // 3 columns: 2 left, 1 right
  const auto out = testing::channels_first(image::clip_resize_and_crop(image, config));
  auto expected = torch::zeros({3, 6, 5}, torch::kUInt8);
  expected.slice(1, 2, 5).slice(2, 2, 4).fill_(200);
  CHECK(torch::equal(out, expected));
  // Padding is black before normalising: its values are -mean / std.
  const auto values = data::pixel_tensor(image::preprocess(image, config));
  CHECK(values[0][0][0].item<float>() == Approx(-0.48145466 / 0.26862954).epsilon(1e-6));
}

TEST_CASE("preprocessor_config.json: both forms of size and crop_size, defaults, a model folder", "[image]") {
  testing::ScratchDir dir;
  auto config = image::load_clip_image_processor_config(dir.write("a/preprocessor_config.json", "{}"));
  CHECK(config.shortest_edge == 224);
  CHECK(config.crop_height == 224);
  CHECK(config.crop_width == 224);
  CHECK(config.resample == image::ResampleFilter::Bicubic);
  CHECK(config.rescale_factor == 1.0 / 255);
  CHECK(config.image_mean[0] == 0.48145466);
  CHECK(config.image_std[2] == 0.27577711);

  dir.write("b/preprocessor_config.json",
            R"({"size": 336, "crop_size": {"height": 320, "width": 300}, "do_center_crop": false,
                "resample": 2, "image_mean": 0.5, "image_std": [0.1, 0.2, 0.3], "processor_class": "LlavaProcessor"})");
  config = image::load_clip_image_processor_config((dir.path() / "b").string());  // the folder
  CHECK(config.shortest_edge == 336);
  CHECK(config.crop_height == 320);
  CHECK(config.crop_width == 300);
  CHECK_FALSE(config.do_center_crop);
  CHECK(config.resample == image::ResampleFilter::Bilinear);
  CHECK(config.image_mean == std::array<double, 3>{0.5, 0.5, 0.5});
  CHECK(config.image_std == std::array<double, 3>{0.1, 0.2, 0.3});

  config = image::load_clip_image_processor_config(
      dir.write("c.json", R"({"size": {"shortest_edge": 336}, "crop_size": 336})"));
  CHECK(config.shortest_edge == 336);
  CHECK(config.crop_width == 336);
}

TEST_CASE("a malformed preprocessor_config.json is an InputError naming the file and the key", "[image]") {
  testing::ScratchDir dir;
  const auto check = [&](const std::string& json, const std::string& key_text) {
    const std::string path = dir.write("preprocessor_config.json", json);
    INFO(json);
    CHECK_THROWS_AS(image::load_clip_image_processor_config(path), InputError);
    CHECK_THROWS_WITH(image::load_clip_image_processor_config(path), Contains(path) && Contains(key_text));
  };
  check(R"({"size": "large"})", "\"size\" must be");
  check(R"({"size": {"shortest_edge": 0}})", "\"size.shortest_edge\" must be a positive integer");
  check(R"({"size": {"shortest_edge": 224, "longest_edge": 1000}})", "\"longest_edge\" is not supported");
  check(R"({"crop_size": {"height": 224}})", "\"crop_size\" must be");
  check(R"({"crop_size": {"height": 224, "width": -1}})", "\"crop_size.width\"");
  check(R"({"do_resize": "yes"})", "\"do_resize\" must be true or false");
  check(R"({"resample": 0})", "NEAREST");
  check(R"({"resample": 9})", "\"resample\"");
  check(R"({"image_mean": [0.5, 0.5]})", "\"image_mean\" must be three numbers");
  check(R"({"image_std": [0.5, 0, 0.5]})", "\"image_std\" must be three positive numbers");
  check(R"({"rescale_factor": "1/255"})", "\"rescale_factor\"");
  check(R"([224])", "not a JSON object");
  check(R"({"size": )", "invalid JSON");
  const std::string missing = (dir.path() / "nowhere" / "preprocessor_config.json").string();
  CHECK_THROWS_WITH(image::load_clip_image_processor_config(missing), Contains(missing) && Contains("not found"));
}
