// The files and Python references the [image] tests compare with, made once per test run:
// tools/reference/make_test_images.py writes the PNGs and JPEGs, tools/reference/clip_preprocess.py
// records what Pillow decodes and what transformers' PIL-based CLIP image processor produces
// under each of the preprocessor configs below.
#pragma once
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <torch/torch.h>

#include "ckpt/safetensors.h"
#include "image/image.h"
#include "scratch_dir.h"

namespace xtrain::testing {

// name -> preprocessor_config.json. Between them: the int and the dict forms of size and
// crop_size, every CLIP default, the crop larger than the image (odd padding, one axis), a fixed
// resize without crop, BICUBIC, BILINEAR and LANCZOS, scalar mean and std.
inline const std::map<std::string, std::string>& image_configs() {
  static const std::map<std::string, std::string> configs = {
      {"clip224", R"({"size": 224, "crop_size": 224})"},
      {"llava336", R"({
  "crop_size": {"height": 336, "width": 336}, "do_center_crop": true, "do_convert_rgb": true,
  "do_normalize": true, "do_rescale": true, "do_resize": true,
  "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_processor_type": "CLIPImageProcessor",
  "image_std": [0.26862954, 0.26130258, 0.27577711], "resample": 3,
  "rescale_factor": 0.00392156862745098, "size": {"shortest_edge": 336}})"},
      {"pad_bilinear", R"({"size": {"shortest_edge": 160}, "crop_size": {"height": 201, "width": 150},
  "resample": 2, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]})"},
      {"fixed_lanczos", R"({"size": {"height": 256, "width": 192}, "do_center_crop": false,
  "resample": 1, "image_mean": 0.5, "image_std": 0.25})"},
  };
  return configs;
}

struct ImageReference {
  ScratchDir dir;
  std::vector<std::string> images;  // full paths, sorted
  ckpt::TensorMap tensors;          // clip_preprocess.py's output

  ImageReference() {
    const auto image_dir = dir.path() / "images";
    std::string command = fmt::format("{} {}/tools/reference/make_test_images.py {}", XTRAIN_PYTHON,
                                      XTRAIN_SOURCE_DIR, image_dir.string());
    if (std::system(command.c_str()) != 0) throw std::runtime_error("failed: " + command);
    for (const auto& entry : std::filesystem::directory_iterator(image_dir)) images.push_back(entry.path().string());
    std::sort(images.begin(), images.end());
    const std::string out = (dir.path() / "reference.safetensors").string();
    command = fmt::format("HF_HUB_OFFLINE=1 TRANSFORMERS_VERBOSITY=error {} -W ignore {}/tools/reference/clip_preprocess.py --out {}",
                          XTRAIN_PYTHON, XTRAIN_SOURCE_DIR, out);
    for (const auto& [name, json] : image_configs())
      command += fmt::format(" --config {}={}", name,
                             std::filesystem::path(dir.write(name + "/preprocessor_config.json", json)).parent_path().string());
    for (const auto& image : images) command += " " + image;
    if (std::system(command.c_str()) != 0) throw std::runtime_error("failed: " + command);
    tensors = ckpt::load_safetensors(out).tensors;
  }

  const torch::Tensor& at(const std::string& key) const {
    const auto found = tensors.find(key);
    if (found == tensors.end()) throw std::runtime_error("no reference tensor " + key);
    return found->second;
  }
  bool has(const std::string& key) const { return tensors.count(key) != 0; }
};

inline const ImageReference& image_reference() {
  static const ImageReference reference;
  return reference;
}

inline std::string file_name(const std::string& path) { return std::filesystem::path(path).filename().string(); }

// An Image's pixels as a uint8 tensor [3, height, width], the layout of the processor's output.
inline torch::Tensor channels_first(const image::Image& image) {
  return torch::from_blob(const_cast<uint8_t*>(image.rgb.data()), {image.height, image.width, 3}, torch::kUInt8)
      .permute({2, 0, 1})
      .clone();
}

}  // namespace xtrain::testing
