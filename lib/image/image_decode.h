// Decoding PNG and JPEG files (told apart by their leading bytes, not their names) into an
// Image whose pixels are those of Pillow's Image.open(path).convert("RGB"), bit for bit: the
// reference every vision-language model's Python preprocessing starts from. What that takes,
// format by format (Pillow's quirks included, so that training sees what inference sees):
//   PNG grey, grey+alpha, palette, RGB, RGBA, at 1-16 bits, interlaced or not: 16-bit samples
//     keep their high byte, except 16-bit grey without alpha, which Pillow clips to 255
//     (its I;16 -> RGB conversion), so 0..255 stay and anything brighter is 255.
//     Transparency (alpha channel, or tRNS) also fills Image::alpha as convert("RGBA") does.
//   JPEG grey, YCbCr, RGB, CMYK and YCCK through libjpeg(-turbo) with Pillow's settings (ISLOW
//     IDCT, fancy upsampling); CMYK as Pillow reads it (Adobe polarity) and converts it to RGB.
// A missing, empty, truncated or corrupt file, an unknown format, or an image of more than
// kMaxImagePixels is an InputError naming the file and the reason; libpng and libjpeg print
// nothing.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "image/image.h"

namespace xtrain::image {

// Pillow's decompression-bomb limit (2 x Image.MAX_IMAGE_PIXELS), past which it refuses too.
constexpr int64_t kMaxImagePixels = 2 * (int64_t{1024} * 1024 * 1024 / 4 / 3);

Image decode_image_file(const std::string& path);

// The same from bytes in memory (an archive member, a blob in a dataset); `name` is what
// errors call it.
Image decode_image(const uint8_t* data, size_t size, const std::string& name);

}  // namespace xtrain::image
