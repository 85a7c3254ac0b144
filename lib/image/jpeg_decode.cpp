#include "image/jpeg_decode.h"

// jpeglib.h needs size_t and FILE declared before it.
#include <csetjmp>
#include <cstdio>

#include <jpeglib.h>
#include <jerror.h>  // JWRN_JPEG_EOF

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "image/image_decode.h"
#include "util/input_error.h"

namespace xtrain::image {
namespace {

// libjpeg reports errors through error_exit, which must not return: it longjmps back to the
// setjmp of the phase that called the library. Everything on that path is plain data.
struct JpegErrors {
  jpeg_error_mgr manager;  // first, so that cinfo->err points at the whole struct
  std::jmp_buf jump;
  bool truncated;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void on_error(j_common_ptr cinfo) {
  auto* errors = reinterpret_cast<JpegErrors*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, errors->message);
  std::longjmp(errors->jump, 1);
}

// Warnings (level -1) are about corrupt data libjpeg decodes around; Pillow decodes those files
// too, so we go on, silently. The exception is the data running out: libjpeg would fill the rest
// of the picture with grey, where Pillow refuses the file as truncated, and so do we.
void on_message(j_common_ptr cinfo, int level) {
  if (level == -1 && cinfo->err->msg_code == JWRN_JPEG_EOF) {
    reinterpret_cast<JpegErrors*>(cinfo->err)->truncated = true;
    on_error(cinfo);
  }
}

void on_output(j_common_ptr) {}

struct JpegLayout {
  JDIMENSION width;
  JDIMENSION height;
  int components;  // of the output: 1 grey, 3 RGB, 4 CMYK
};

// Phase 1: the header, and Pillow's settings: libjpeg's defaults (ISLOW IDCT, fancy upsampling,
// no scaling), the output in the file's own colour family. Nothing is allocated for the pixels
// yet, so that an oversized image is refused first.
bool read_header(jpeg_decompress_struct* cinfo, JpegErrors* errors, const uint8_t* data, size_t size,
                 JpegLayout* layout) {
  if (setjmp(errors->jump)) return false;
  jpeg_mem_src(cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(cinfo, TRUE);
  switch (cinfo->jpeg_color_space) {
    case JCS_GRAYSCALE: cinfo->out_color_space = JCS_GRAYSCALE; layout->components = 1; break;
    case JCS_CMYK:
    case JCS_YCCK: cinfo->out_color_space = JCS_CMYK; layout->components = 4; break;
    default: cinfo->out_color_space = JCS_RGB; layout->components = 3; break;
  }
  cinfo->dct_method = JDCT_ISLOW;
  cinfo->do_fancy_upsampling = TRUE;
  layout->width = cinfo->image_width;
  layout->height = cinfo->image_height;
  return true;
}

// Phase 2: decompression, every scanline into memory the caller owns, then the rest of the file
// up to EOI.
bool read_scanlines(jpeg_decompress_struct* cinfo, JpegErrors* errors, const JpegLayout& layout, JSAMPROW* rows) {
  if (setjmp(errors->jump)) return false;
  jpeg_start_decompress(cinfo);
  // The rows were sized from the header; libjpeg must agree before it writes into them.
  if (cinfo->output_width != layout.width || cinfo->output_height != layout.height ||
      cinfo->output_components != layout.components) {
    std::snprintf(errors->message, sizeof errors->message, "unexpected output layout");
    return false;
  }
  while (cinfo->output_scanline < cinfo->output_height)
    jpeg_read_scanlines(cinfo, rows + cinfo->output_scanline, cinfo->output_height - cinfo->output_scanline);
  jpeg_finish_decompress(cinfo);
  return true;
}

// Pillow reads CMYK JPEGs inverted ("CMYK;I", Adobe's convention, always) and converts CMYK to
// RGB as 255 - k - c (255 - k) / 255 with its rounded integer division.
void cmyk_to_rgb(const std::vector<uint8_t>& cmyk, Image* image) {
  const auto muldiv255 = [](int a, int b) {
    const int t = a * b + 128;
    return ((t >> 8) + t) >> 8;
  };
  const size_t count = cmyk.size() / 4;
  for (size_t i = 0; i < count; ++i) {
    const uint8_t* in = &cmyk[i * 4];
    const int not_k = in[3];  // 255 - (255 - stored k)
    for (int c = 0; c < 3; ++c) {
      const int value = not_k - muldiv255(255 - in[c], not_k);
      image->rgb[i * 3 + c] = static_cast<uint8_t>(std::clamp(value, 0, 255));
    }
  }
}

}  // namespace

Image decode_jpeg(const uint8_t* data, size_t size, const std::string& name) {
  JpegErrors errors{};
  jpeg_decompress_struct cinfo{};
  cinfo.err = jpeg_std_error(&errors.manager);
  errors.manager.error_exit = on_error;
  errors.manager.emit_message = on_message;
  errors.manager.output_message = on_output;
  jpeg_create_decompress(&cinfo);
  struct Destroy {
    jpeg_decompress_struct* cinfo;
    ~Destroy() { jpeg_destroy_decompress(cinfo); }
  } destroy{&cinfo};
  const auto fail = [&]() -> InputError {
    return InputError(name + (errors.truncated ? ": truncated JPEG: " : ": corrupt JPEG: ") + errors.message);
  };

  JpegLayout layout{};
  if (!read_header(&cinfo, &errors, data, size, &layout)) throw fail();
  if (int64_t{layout.width} * layout.height > kMaxImagePixels)
    throw InputError(name + ": the image is " + std::to_string(layout.width) + " x " + std::to_string(layout.height) +
                     " pixels, more than the " + std::to_string(kMaxImagePixels) + " accepted");
  const size_t row_bytes = size_t{layout.width} * layout.components;
  std::vector<uint8_t> pixels(row_bytes * layout.height);
  std::vector<JSAMPROW> rows(layout.height);
  for (JDIMENSION y = 0; y < layout.height; ++y) rows[y] = pixels.data() + y * row_bytes;
  if (!read_scanlines(&cinfo, &errors, layout, rows.data())) throw fail();

  Image image;
  image.width = layout.width;
  image.height = layout.height;
  if (layout.components == 3) {
    image.rgb = std::move(pixels);
    return image;
  }
  image.rgb.resize(size_t{layout.width} * layout.height * 3);
  if (layout.components == 4) {
    cmyk_to_rgb(pixels, &image);
  } else {
    for (size_t i = 0; i < pixels.size(); ++i) std::fill_n(&image.rgb[i * 3], 3, pixels[i]);
  }
  return image;
}

}  // namespace xtrain::image
