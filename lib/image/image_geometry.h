// Crops and mirrors of an Image, as Pillow computes them (pixels copied, no filtering):
// Image.crop((left, top, left + width, top + height)) and
// Image.transpose(Image.FLIP_LEFT_RIGHT). Any alpha plane goes along.
#pragma once
#include <cstdint>

#include "image/image.h"

namespace xtrain::image {

struct CropBox {
  int64_t top = 0, left = 0, height = 0, width = 0;
};

// The box lies inside the image and is not empty (std::invalid_argument otherwise).
Image crop(const Image& image, const CropBox& box);
Image flip_left_right(const Image& image);

}  // namespace xtrain::image
