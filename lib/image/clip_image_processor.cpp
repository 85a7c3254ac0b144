#include "image/clip_image_processor.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/durable_file.h"
#include "util/input_error.h"

namespace xtrain::image {
namespace {

using nlohmann::json;

// A key's value, or null when the file lacks it (transformers keeps the class default for both).
const json& value_of(const json& object, const char* key) {
  static const json null;
  const auto found = object.find(key);
  return found == object.end() ? null : *found;
}

InputError bad_value(const std::string& where, const char* key, const char* expected, const json& value) {
  return InputError(fmt::format("{}: \"{}\" must be {} (got {})", where, key, expected, value.dump()));
}

void read_bool(const json& object, const char* key, const std::string& where, bool* out) {
  const json& value = value_of(object, key);
  if (value.is_null()) return;
  if (!value.is_boolean()) throw bad_value(where, key, "true or false", value);
  *out = value.get<bool>();
}

int64_t positive_int(const json& value, const std::string& where, const char* key) {
  if (!value.is_number_integer() || value.get<int64_t>() < 1) throw bad_value(where, key, "a positive integer", value);
  return value.get<int64_t>();
}

// "size": N, {"shortest_edge": N} or {"height": H, "width": W}.
void read_size(const json& object, const std::string& where, ClipImageProcessorConfig* config) {
  const json& size = value_of(object, "size");
  if (size.is_null()) return;
  const char* expected = "N, {\"shortest_edge\": N} or {\"height\": H, \"width\": W}";
  if (size.is_number_integer()) {
    config->shortest_edge = positive_int(size, where, "size");
  } else if (size.is_object() && size.contains("longest_edge")) {
    throw InputError(fmt::format("{}: \"size\" with \"longest_edge\" is not supported (expected {})", where, expected));
  } else if (size.is_object() && size.contains("shortest_edge")) {
    config->shortest_edge = positive_int(size["shortest_edge"], where, "size.shortest_edge");
  } else if (size.is_object() && size.contains("height") && size.contains("width")) {
    config->resize_height = positive_int(size["height"], where, "size.height");
    config->resize_width = positive_int(size["width"], where, "size.width");
  } else {
    throw bad_value(where, "size", expected, size);
  }
}

// "crop_size": N or {"height": H, "width": W}.
void read_crop_size(const json& object, const std::string& where, ClipImageProcessorConfig* config) {
  const json& crop = value_of(object, "crop_size");
  if (crop.is_null()) return;
  if (crop.is_number_integer()) {
    config->crop_height = config->crop_width = positive_int(crop, where, "crop_size");
  } else if (crop.is_object() && crop.contains("height") && crop.contains("width")) {
    config->crop_height = positive_int(crop["height"], where, "crop_size.height");
    config->crop_width = positive_int(crop["width"], where, "crop_size.width");
  } else {
    throw bad_value(where, "crop_size", "N or {\"height\": H, \"width\": W}", crop);
  }
}

void read_resample(const json& object, const std::string& where, ClipImageProcessorConfig* config) {
  const json& value = value_of(object, "resample");
  if (value.is_null()) return;
  if (value.is_number_integer() && value.get<int64_t>() == 0)
    throw InputError(where + ": \"resample\": 0 (NEAREST) is not supported; use 1-5 (LANCZOS, BILINEAR, BICUBIC, BOX, HAMMING)");
  if (!value.is_number_integer() || value.get<int64_t>() < 1 || value.get<int64_t>() > 5)
    throw bad_value(where, "resample", "one of Pillow's filters 1-5 (3: BICUBIC)", value);
  config->resample = static_cast<ResampleFilter>(value.get<int>());
}

// "image_mean" / "image_std": three numbers, or one for every channel.
void read_channels(const json& object, const char* key, const std::string& where, bool positive,
                   std::array<double, 3>* out) {
  const json& value = value_of(object, key);
  if (value.is_null()) return;
  const char* expected = positive ? "three positive numbers, or one" : "three numbers, or one";
  std::array<double, 3> channels{};
  if (value.is_number()) {
    channels.fill(value.get<double>());
  } else if (value.is_array() && value.size() == 3 && std::all_of(value.begin(), value.end(), [](const json& v) { return v.is_number(); })) {
    for (size_t c = 0; c < 3; ++c) channels[c] = value[c].get<double>();
  } else {
    throw bad_value(where, key, expected, value);
  }
  if (positive && std::any_of(channels.begin(), channels.end(), [](double v) { return !(v > 0); }))
    throw bad_value(where, key, expected, value);
  *out = channels;
}

// transformers' center_crop along one axis: where in the input the crop starts (negative: the
// crop is larger, and the input lands ceil((crop - size) / 2) into zero padding).
int64_t crop_start(int64_t size, int64_t crop) {
  if (size >= crop) return (size - crop) / 2;
  return -((crop - size + 1) / 2);
}

Image center_crop(const Image& image, int64_t crop_height, int64_t crop_width) {
  if (image.height == crop_height && image.width == crop_width) return image;
  const int64_t top = crop_start(image.height, crop_height);
  const int64_t left = crop_start(image.width, crop_width);
  Image out;
  out.height = crop_height;
  out.width = crop_width;
  out.rgb.assign(crop_height * crop_width * 3, 0);
  for (int64_t y = 0; y < crop_height; ++y) {
    const int64_t source_y = top + y;
    if (source_y < 0 || source_y >= image.height) continue;
    const int64_t x_begin = std::max<int64_t>(0, -left);
    const int64_t x_end = std::min(crop_width, image.width - left);
    if (x_begin >= x_end) continue;
    std::copy_n(&image.rgb[(source_y * image.width + left + x_begin) * 3], (x_end - x_begin) * 3,
                &out.rgb[(y * crop_width + x_begin) * 3]);
  }
  return out;
}

}  // namespace

ClipImageProcessorConfig parse_clip_image_processor_config(const json& object, const std::string& where) {
  if (!object.is_object()) throw InputError(where + ": not a JSON object");
  ClipImageProcessorConfig config;
  read_bool(object, "do_convert_rgb", where, &config.do_convert_rgb);
  read_bool(object, "do_resize", where, &config.do_resize);
  read_size(object, where, &config);
  read_resample(object, where, &config);
  read_bool(object, "do_center_crop", where, &config.do_center_crop);
  read_crop_size(object, where, &config);
  read_bool(object, "do_rescale", where, &config.do_rescale);
  const json& factor = value_of(object, "rescale_factor");
  if (!factor.is_null()) {
    if (!factor.is_number() || !(factor.get<double>() > 0)) throw bad_value(where, "rescale_factor", "a positive number", factor);
    config.rescale_factor = factor.get<double>();
  }
  read_bool(object, "do_normalize", where, &config.do_normalize);
  read_channels(object, "image_mean", where, false, &config.image_mean);
  read_channels(object, "image_std", where, true, &config.image_std);
  return config;
}

ClipImageProcessorConfig load_clip_image_processor_config(const std::string& path) {
  const std::string file = std::filesystem::is_directory(path) ? path + "/preprocessor_config.json" : path;
  if (!std::filesystem::is_regular_file(file))
    throw InputError(file + ": not found (expected a Hugging Face preprocessor_config.json)");
  json object;
  try {
    object = json::parse(util::read_file(file));
  } catch (const json::exception& e) {
    throw InputError(fmt::format("{}: invalid JSON: {}", file, e.what()));
  }
  return parse_clip_image_processor_config(object, file);
}

std::pair<int64_t, int64_t> clip_resize_size(int64_t height, int64_t width, const ClipImageProcessorConfig& config) {
  if (config.resize_height > 0) return {config.resize_height, config.resize_width};
  // get_resize_output_image_size(default_to_square=False): int(N * long / short) in doubles.
  const int64_t short_edge = std::min(height, width), long_edge = std::max(height, width);
  const int64_t new_short = config.shortest_edge;
  const auto new_long = static_cast<int64_t>(static_cast<double>(new_short * long_edge) / static_cast<double>(short_edge));
  return width <= height ? std::pair{new_long, new_short} : std::pair{new_short, new_long};
}

Image clip_resize_and_crop(const Image& image, const ClipImageProcessorConfig& config) {
  Image result = config.do_convert_rgb ? composite_on_white(image) : Image{image.width, image.height, image.rgb, {}};
  if (config.do_resize) {
    const auto [height, width] = clip_resize_size(result.height, result.width, config);
    if (height != result.height || width != result.width) result = pil_resize(result, width, height, config.resample);
  }
  if (config.do_center_crop) result = center_crop(result, config.crop_height, config.crop_width);
  return result;
}

PixelValues clip_rescale_and_normalize(const Image& image, const ClipImageProcessorConfig& config) {
  const int64_t pixels = image.height * image.width;
  PixelValues out{3, image.height, image.width, std::vector<float>(3 * pixels)};
  float* values = out.values.data();
  for (int c = 0; c < 3; ++c) {
    // The order and precision of transformers' numpy: a float64 product rounded to float32,
    // then float32 arithmetic with the mean and std rounded to float32.
    const auto mean = static_cast<float>(config.image_mean[c]);
    const auto deviation = static_cast<float>(config.image_std[c]);
    float* plane = values + c * pixels;
    for (int64_t i = 0; i < pixels; ++i) {
      const uint8_t pixel = image.rgb[i * 3 + c];
      float value = config.do_rescale ? static_cast<float>(pixel * config.rescale_factor) : static_cast<float>(pixel);
      if (config.do_normalize) value = (value - mean) / deviation;
      plane[i] = value;
    }
  }
  return out;
}

PixelValues preprocess(const Image& image, const ClipImageProcessorConfig& config) {
  return clip_rescale_and_normalize(clip_resize_and_crop(image, config), config);
}

}  // namespace xtrain::image
