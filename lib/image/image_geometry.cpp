#include "image/image_geometry.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace xtrain::image {
namespace {

// Row r of `plane` (channels bytes a pixel), pixels [left, left + width).
void copy_rows(const std::vector<uint8_t>& plane, int64_t image_width, int64_t channels, const CropBox& box,
               std::vector<uint8_t>& out) {
  out.resize(static_cast<size_t>(box.height * box.width * channels));
  for (int64_t r = 0; r < box.height; ++r) {
    const auto from = plane.begin() + ((box.top + r) * image_width + box.left) * channels;
    std::copy(from, from + box.width * channels, out.begin() + r * box.width * channels);
  }
}

void mirror_rows(std::vector<uint8_t>& plane, int64_t width, int64_t height, int64_t channels) {
  for (int64_t r = 0; r < height; ++r)
    for (int64_t a = 0, b = width - 1; a < b; ++a, --b)
      std::swap_ranges(plane.begin() + (r * width + a) * channels, plane.begin() + (r * width + a + 1) * channels,
                       plane.begin() + (r * width + b) * channels);
}

}  // namespace

Image crop(const Image& image, const CropBox& box) {
  if (box.height < 1 || box.width < 1 || box.top < 0 || box.left < 0 || box.top + box.height > image.height ||
      box.left + box.width > image.width)
    throw std::invalid_argument("a crop box of " + std::to_string(box.width) + "x" + std::to_string(box.height) +
                                " at (" + std::to_string(box.left) + ", " + std::to_string(box.top) +
                                ") outside an image of " + std::to_string(image.width) + "x" +
                                std::to_string(image.height));
  Image out;
  out.width = box.width;
  out.height = box.height;
  copy_rows(image.rgb, image.width, 3, box, out.rgb);
  if (image.has_alpha()) copy_rows(image.alpha, image.width, 1, box, out.alpha);
  return out;
}

Image flip_left_right(const Image& image) {
  Image out = image;
  mirror_rows(out.rgb, out.width, out.height, 3);
  if (out.has_alpha()) mirror_rows(out.alpha, out.width, out.height, 1);
  return out;
}

}  // namespace xtrain::image
