#include "image/image.h"

#include <utility>

namespace xtrain::image {

Image composite_on_white(Image image) {
  if (!image.has_alpha()) return image;
  // Pillow's AlphaComposite.c with an opaque white destination: 7 extra bits of precision and
  // rounded divisions by 255, so that its results are reproduced exactly, not approximated.
  constexpr uint32_t precision_bits = 7;
  const auto div255 = [](uint32_t a) { return ((a >> 8) + a) >> 8; };
  const int64_t pixels = image.width * image.height;
  for (int64_t i = 0; i < pixels; ++i) {
    const uint32_t source_alpha = image.alpha[i];
    uint8_t* rgb = &image.rgb[i * 3];
    if (source_alpha == 0) {
      rgb[0] = rgb[1] = rgb[2] = 255;
      continue;
    }
    const uint32_t blend = 255 * (255 - source_alpha);
    const uint32_t out_alpha_255 = source_alpha * 255 + blend;
    const uint32_t coef1 = source_alpha * 255 * 255 * (1u << precision_bits) / out_alpha_255;
    const uint32_t coef2 = 255 * (1u << precision_bits) - coef1;
    for (int c = 0; c < 3; ++c) {
      const uint32_t mixed = rgb[c] * coef1 + 255 * coef2;
      rgb[c] = static_cast<uint8_t>(div255(mixed + (0x80u << precision_bits)) >> precision_bits);
    }
  }
  image.alpha.clear();
  return image;
}

}  // namespace xtrain::image
