// decode_png: a PNG file's bytes (signature included) to an Image, as Pillow decodes and
// converts it; the rules are image_decode.h's. Reached through decode_image, which tells the
// formats apart; problems are InputErrors naming `name`.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "image/image.h"

namespace xtrain::image {

Image decode_png(const uint8_t* data, size_t size, const std::string& name);

}  // namespace xtrain::image
