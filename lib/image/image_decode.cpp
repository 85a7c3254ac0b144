#include "image/image_decode.h"

#include <cstring>

#include "image/jpeg_decode.h"
#include "image/png_decode.h"
#include "util/input_error.h"
#include "util/mapped_file.h"

namespace xtrain::image {
namespace {

constexpr uint8_t kPngSignature[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
constexpr uint8_t kJpegSignature[] = {0xff, 0xd8, 0xff};  // SOI, then the first marker

bool has_signature(const uint8_t* data, size_t size, const uint8_t* prefix, size_t length) {
  return size >= length && std::memcmp(data, prefix, length) == 0;
}

// The first bytes in hex, for a message about a file that is neither format.
std::string leading_bytes(const uint8_t* data, size_t size) {
  static const char digits[] = "0123456789abcdef";
  std::string hex;
  for (size_t i = 0; i < size && i < 8; ++i) {
    if (i) hex += ' ';
    hex += digits[data[i] >> 4];
    hex += digits[data[i] & 15];
  }
  return hex;
}

}  // namespace

Image decode_image(const uint8_t* data, size_t size, const std::string& name) {
  if (size == 0) throw InputError(name + ": file is empty (expected a PNG or JPEG image)");
  if (has_signature(data, size, kPngSignature, sizeof kPngSignature)) return decode_png(data, size, name);
  if (has_signature(data, size, kJpegSignature, sizeof kJpegSignature)) return decode_jpeg(data, size, name);
  throw InputError(name + ": not a PNG or JPEG image (it starts with bytes " + leading_bytes(data, size) + ")");
}

Image decode_image_file(const std::string& path) {
  const util::MappedFile file(path);
  return decode_image(file.data(), file.size(), path);
}

}  // namespace xtrain::image
