// CLIP image preprocessing, as Hugging Face transformers' PIL-based CLIP image processor does it
// (transformers 5: CLIPImageProcessorPil, which CLIPImageProcessor falls back to without
// torchvision; transformers 4: CLIPImageProcessor itself), for LLaVA-style vision encoders:
//   1. convert to RGB: an image with transparency is composited over white (image.h);
//   2. resize with Pillow's filter (pil_resize.h) so that the shortest edge is N, the long edge
//      int(N * long / short) (get_resize_output_image_size, default_to_square=False), or to a
//      fixed height x width when the config says so;
//   3. centre crop: offsets (size - crop) // 2; an image smaller than the crop is zero-padded,
//      the image ceil((crop - size) / 2) from the top and left (transformers' center_crop);
//   4. rescale: float32(double(pixel) * rescale_factor);
//   5. normalise: (value - mean) / std in float32.
// The result is float32 pixel values [3, height, width] (pixel_values.h).
//
// Where the result may differ from the reference, and why. On the 43 generated test files
// (PNG grey to RGBA at 1-16 bits, interlaced; JPEG 4:2:0, 4:2:2, 4:4:4, progressive, grey, CMYK;
// 97x131 to 1000x50) under four configs, it does not: the decoders follow Pillow's conversions,
// the resize is Pillow's fixed-point arithmetic step by step, and steps 4-5 are the same float
// operations in the same order, so every value is equal, bit for bit. It can differ
//   - against Pillow 12 or older, on a resize whose height shrinks by more than twice as many
//     pixels as its width: those filter horizontally first, Pillow 13 (the pinned one, which
//     pil_resize.h follows) vertically first; the 8-bit intermediate makes the results differ;
//   - on a JPEG, if xtrain links another libjpeg than libjpeg-turbo, which Pillow bundles (IJG
//     libjpeg 7 and later upsample chroma by DCT scaling; libjpeg-turbo's ISLOW IDCT and fancy
//     upsampling are the same in every version, which is why Debian's 2.1 agrees with Pillow's 3.2);
//   - where it is not implemented: NEAREST resampling, size {"shortest_edge", "longest_edge"},
//     do_convert_rgb false on an image with alpha (transformers keeps 4 channels; here alpha is
//     dropped), and the dtype with both do_rescale and do_normalize off (float32 here, uint8 there).
#pragma once
#include <array>
#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "image/image.h"
#include "image/pil_resize.h"
#include "image/pixel_values.h"

namespace xtrain::image {

struct ClipImageProcessorConfig {
  bool do_convert_rgb = true;
  bool do_resize = true;
  int64_t shortest_edge = 224;  // "size": {"shortest_edge": N} or N
  int64_t resize_height = 0;    // "size": {"height": H, "width": W}: a fixed size, when > 0
  int64_t resize_width = 0;
  ResampleFilter resample = ResampleFilter::Bicubic;  // "resample": Pillow's number, 3
  bool do_center_crop = true;
  int64_t crop_height = 224;  // "crop_size": {"height": H, "width": W} or N
  int64_t crop_width = 224;
  bool do_rescale = true;
  double rescale_factor = 1.0 / 255.0;
  bool do_normalize = true;
  std::array<double, 3> image_mean = {0.48145466, 0.4578275, 0.40821073};  // OPENAI_CLIP_MEAN
  std::array<double, 3> image_std = {0.26862954, 0.26130258, 0.27577711};  // OPENAI_CLIP_STD
};

// Reads a Hugging Face preprocessor_config.json, or the one in a model folder. Keys it lacks keep
// the defaults above (the CLIP processor's); keys it does not know are ignored. A missing or
// malformed file, or a value of the wrong type or range, is an InputError naming the file and key.
ClipImageProcessorConfig load_clip_image_processor_config(const std::string& path);
ClipImageProcessorConfig parse_clip_image_processor_config(const nlohmann::json& json, const std::string& where);

// The (height, width) step 2 resizes an image of this size to.
std::pair<int64_t, int64_t> clip_resize_size(int64_t height, int64_t width, const ClipImageProcessorConfig& config);

// Steps 1-3: the 8-bit image the vision encoder's pixels come from.
Image clip_resize_and_crop(const Image& image, const ClipImageProcessorConfig& config);

// Steps 4-5 on an 8-bit image: float32 [3, height, width].
PixelValues clip_rescale_and_normalize(const Image& image, const ClipImageProcessorConfig& config);

// Steps 1-5.
PixelValues preprocess(const Image& image, const ClipImageProcessorConfig& config);

}  // namespace xtrain::image
