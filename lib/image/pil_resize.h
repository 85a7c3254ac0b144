// pil_resize: Pillow's Image.resize(size, resample=filter) of an 8-bit RGB image, reproduced bit
// for bit (Pillow 13's src/libImaging/Resample.c): a separable convolution, one axis into an 8-bit
// intermediate, then the other: horizontal first, except where the height shrinks by more than
// twice as many pixels as the width (Pillow 12 and older: always horizontal first, so their
// results differ on such resizes). On a downscale the filter's support widens by the
// scale factor (antialiasing); weights normalised to sum 1 in double, then rounded to 22-bit
// fixed point; each sum starts at one half, shifts right 22 bits and clips to 0..255. An axis
// whose size does not change is not filtered. Filters are Pillow's numbers; NEAREST (0), which
// Pillow computes another way, is not offered. Any alpha plane is ignored (the result has none).
#pragma once
#include <cstdint>

#include "image/image.h"

namespace xtrain::image {

enum class ResampleFilter { Lanczos = 1, Bilinear = 2, Bicubic = 3, Box = 4, Hamming = 5 };

// width and height >= 1; the input non-empty.
Image pil_resize(const Image& image, int64_t width, int64_t height, ResampleFilter filter);

}  // namespace xtrain::image
