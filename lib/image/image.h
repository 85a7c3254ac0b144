// Image: an 8-bit picture as decoded from a file, row-major, interleaved RGB (height x width x 3).
// `rgb` holds exactly what Pillow's Image.open(path).convert("RGB") gives: any alpha is dropped,
// not composited. When the file carries transparency (an alpha channel, or a PNG tRNS chunk),
// `alpha` holds Pillow's convert("RGBA") alpha plane (height x width), so that a consumer that
// composites, as transformers' image processors do, can; it is empty for an opaque file.
#pragma once
#include <cstdint>
#include <vector>

namespace xtrain::image {

struct Image {
  int64_t width = 0;
  int64_t height = 0;
  std::vector<uint8_t> rgb;    // height * width * 3
  std::vector<uint8_t> alpha;  // height * width, or empty: opaque

  bool has_alpha() const { return !alpha.empty(); }
};

// Pillow's Image.alpha_composite of the image over an opaque white background, then RGB (its
// integer arithmetic, bit for bit): what transformers' convert_to_rgb does to an image with
// transparency. An opaque image is returned as it is.
Image composite_on_white(Image image);

}  // namespace xtrain::image
