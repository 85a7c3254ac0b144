#include "image/png_decode.h"

#include <png.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "image/image_decode.h"
#include "util/input_error.h"

namespace xtrain::image {
namespace {

// libpng reports errors through these callbacks and a longjmp back to the setjmp of the phase
// that called it; everything they touch is plain data, so no destructor is skipped.
struct PngContext {
  const uint8_t* data;
  size_t size;
  size_t offset;
  bool truncated;
  char message[256];
};

void on_error(png_structp png, png_const_charp message) {
  auto* context = static_cast<PngContext*>(png_get_error_ptr(png));
  std::snprintf(context->message, sizeof context->message, "%s", message);
  png_longjmp(png, 1);
}

// Warnings are about chunks libpng skips (a bad CRC on an ancillary chunk, an odd ICC profile);
// Pillow decodes such files, and so do we, silently.
void on_warning(png_structp, png_const_charp) {}

void read_bytes(png_structp png, png_bytep out, size_t count) {
  auto* context = static_cast<PngContext*>(png_get_io_ptr(png));
  if (count > context->size - context->offset) {
    context->truncated = true;
    png_error(png, "the file ends before the image does");
  }
  std::memcpy(out, context->data + context->offset, count);
  context->offset += count;
}

// What the header says, and how rows come out of libpng once the transformations are set.
struct PngLayout {
  png_uint_32 width;
  png_uint_32 height;
  int color_type;       // as stored in the file
  int bit_depth;        // as stored in the file
  bool grey16;          // 16-bit grey rows, one big-endian sample a pixel, left as they are
  bool colour_key;      // a tRNS colour key (grey or RGB): the alpha is computed here
  png_color_16 key;     // its raw values
  bool alpha_out;       // rows carry an alpha channel (RGBA)
  size_t row_bytes;
};

// Phase 1: the header, and the transformations that turn every other layout into 8-bit RGB or
// RGBA rows as Pillow converts them. Returns false after a libpng error.
bool read_header(png_structp png, png_infop info, PngLayout* layout) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_info(png, info);
  layout->width = png_get_image_width(png, info);
  layout->height = png_get_image_height(png, info);
  layout->color_type = png_get_color_type(png, info);
  layout->bit_depth = png_get_bit_depth(png, info);
  png_color_16p key = nullptr;
  const bool has_trns = png_get_valid(png, info, PNG_INFO_tRNS) &&
                        png_get_tRNS(png, info, nullptr, nullptr, &key) != 0;
  const bool palette = layout->color_type == PNG_COLOR_TYPE_PALETTE;
  const bool grey = layout->color_type == PNG_COLOR_TYPE_GRAY;
  layout->colour_key = has_trns && !palette && key != nullptr;
  if (layout->colour_key) layout->key = *key;
  layout->grey16 = grey && layout->bit_depth == 16;
  if (!layout->grey16) {
    png_set_strip_16(png);  // Pillow keeps the high byte of 16-bit samples ("RGB;16B" and kin)
    if (palette) png_set_palette_to_rgb(png);
    if (palette && has_trns) png_set_tRNS_to_alpha(png);  // each entry's own alpha
    if (grey && layout->bit_depth < 8) png_set_expand_gray_1_2_4_to_8(png);  // x255, x85, x17
    if (grey || layout->color_type == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
  }
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  layout->alpha_out = (png_get_color_type(png, info) & PNG_COLOR_MASK_ALPHA) != 0;
  layout->row_bytes = png_get_rowbytes(png, info);
  return true;
}

// Phase 2: every row into memory the caller owns.
bool read_rows(png_structp png, png_bytepp rows) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_image(png, rows);
  return true;
}

// Pillow's convert("RGBA") of a grey or RGB image with a tRNS colour key compares its 8-bit
// pixels with the key's low byte (the 1-bit "1" mode: the key scaled to 0 or 255), so a 16-bit
// or 2-bit key may match other pixels than libpng's tRNS_to_alpha would; we do as Pillow does.
std::vector<uint8_t> colour_key_alpha(const Image& image, const PngLayout& layout) {
  uint8_t key[3];
  if (layout.color_type == PNG_COLOR_TYPE_GRAY) {
    const int gray = layout.bit_depth == 1 ? (layout.key.gray ? 255 : 0) : layout.key.gray & 0xff;
    key[0] = key[1] = key[2] = static_cast<uint8_t>(gray);
  } else {
    key[0] = static_cast<uint8_t>(layout.key.red & 0xff);
    key[1] = static_cast<uint8_t>(layout.key.green & 0xff);
    key[2] = static_cast<uint8_t>(layout.key.blue & 0xff);
  }
  std::vector<uint8_t> alpha(image.rgb.size() / 3);
  for (size_t i = 0; i < alpha.size(); ++i)
    alpha[i] = std::equal(key, key + 3, &image.rgb[i * 3]) ? 0 : 255;
  return alpha;
}

// Rows as libpng gave them -> Image: RGBA split, 16-bit grey clipped to 255 (Pillow's I;16 -> RGB).
Image to_image(const std::vector<uint8_t>& pixels, const PngLayout& layout) {
  Image image;
  image.width = layout.width;
  image.height = layout.height;
  const size_t count = size_t{layout.width} * layout.height;
  image.rgb.resize(count * 3);
  if (layout.grey16) {
    for (size_t i = 0; i < count; ++i) {
      const int value = (pixels[i * 2] << 8) | pixels[i * 2 + 1];
      std::fill_n(&image.rgb[i * 3], 3, static_cast<uint8_t>(std::min(value, 255)));
    }
  } else if (layout.alpha_out) {
    image.alpha.resize(count);
    for (size_t i = 0; i < count; ++i) {
      std::copy_n(&pixels[i * 4], 3, &image.rgb[i * 3]);
      image.alpha[i] = pixels[i * 4 + 3];
    }
  } else {
    std::copy_n(pixels.data(), count * 3, image.rgb.data());
  }
  if (layout.colour_key) image.alpha = colour_key_alpha(image, layout);
  return image;
}

// Owns libpng's two structures for one decode.
struct PngReader {
  png_structp png = nullptr;
  png_infop info = nullptr;

  explicit PngReader(PngContext* context) {
    png = png_create_read_struct(PNG_LIBPNG_VER_STRING, context, on_error, on_warning);
    if (png) info = png_create_info_struct(png);
    if (!info) {
      png_destroy_read_struct(&png, nullptr, nullptr);
      throw std::bad_alloc();
    }
  }
  ~PngReader() { png_destroy_read_struct(&png, &info, nullptr); }
  PngReader(const PngReader&) = delete;
  PngReader& operator=(const PngReader&) = delete;
};

}  // namespace

Image decode_png(const uint8_t* data, size_t size, const std::string& name) {
  PngContext context{data, size, 0, false, {}};
  PngReader reader(&context);
  png_set_read_fn(reader.png, &context, read_bytes);
  const auto fail = [&]() -> InputError {
    if (context.truncated) return InputError(name + ": truncated PNG: " + context.message);
    return InputError(name + ": corrupt PNG: " + context.message);
  };
  PngLayout layout{};
  if (!read_header(reader.png, reader.info, &layout)) throw fail();
  if (int64_t{layout.width} * layout.height > kMaxImagePixels)
    throw InputError(name + ": the image is " + std::to_string(layout.width) + " x " + std::to_string(layout.height) +
                     " pixels, more than the " + std::to_string(kMaxImagePixels) + " accepted");
  std::vector<uint8_t> pixels(layout.row_bytes * layout.height);
  std::vector<png_bytep> rows(layout.height);
  for (png_uint_32 y = 0; y < layout.height; ++y) rows[y] = pixels.data() + y * layout.row_bytes;
  if (!read_rows(reader.png, rows.data())) throw fail();
  return to_image(pixels, layout);
}

}  // namespace xtrain::image
