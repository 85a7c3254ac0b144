#include "image/pil_resize.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

namespace xtrain::image {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;  // Pillow's: 8-bit samples times weights fit in int32

// Pillow's filter kernels, written as Resample.c writes them so that the doubles agree.
double box_kernel(double x) { return x > -0.5 && x <= 0.5 ? 1.0 : 0.0; }

double bilinear_kernel(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

double hamming_kernel(double x) {
  x = std::fabs(x);
  if (x == 0.0) return 1.0;
  if (x >= 1.0) return 0.0;
  x = x * M_PI;
  return std::sin(x) / x * (0.54 + 0.46 * std::cos(x));
}

double bicubic_kernel(double x) {
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

double sinc(double x) {
  if (x == 0.0) return 1.0;
  x = x * M_PI;
  return std::sin(x) / x;
}

double lanczos_kernel(double x) { return -3.0 <= x && x < 3.0 ? sinc(x) * sinc(x / 3) : 0.0; }

struct Kernel {
  double (*weight)(double);
  double support;
};

Kernel kernel_of(ResampleFilter filter) {
  switch (filter) {
    case ResampleFilter::Box: return {box_kernel, 0.5};
    case ResampleFilter::Bilinear: return {bilinear_kernel, 1.0};
    case ResampleFilter::Hamming: return {hamming_kernel, 1.0};
    case ResampleFilter::Bicubic: return {bicubic_kernel, 2.0};
    case ResampleFilter::Lanczos: return {lanczos_kernel, 3.0};
  }
  throw std::invalid_argument("pil_resize: unknown filter");
}

// For each output position along one axis: the first input sample it reads, how many, and
// their fixed-point weights (`taps` slots per output, zero past `count`).
struct Taps {
  int64_t taps = 0;
  std::vector<int64_t> first;
  std::vector<int64_t> count;
  std::vector<int32_t> weights;
};

// Pillow's precompute_coeffs and normalize_coeffs_8bpc.
Taps precompute(int64_t in_size, int64_t out_size, const Kernel& kernel) {
  const double scale = static_cast<double>(static_cast<float>(in_size)) / static_cast<double>(out_size);
  const double filter_scale = std::max(scale, 1.0);
  const double support = kernel.support * filter_scale;
  Taps taps;
  taps.taps = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  taps.first.resize(out_size);
  taps.count.resize(out_size);
  taps.weights.assign(out_size * taps.taps, 0);
  std::vector<double> weights(taps.taps);
  for (int64_t out = 0; out < out_size; ++out) {
    const double center = (out + 0.5) * scale;
    const double inverse = 1.0 / filter_scale;
    const int64_t first = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5), 0);
    const int64_t count = std::min<int64_t>(static_cast<int64_t>(center + support + 0.5), in_size) - first;
    double total = 0.0;
    for (int64_t i = 0; i < count; ++i) {
      weights[i] = kernel.weight((i + first - center + 0.5) * inverse);
      total += weights[i];
    }
    int32_t* fixed = &taps.weights[out * taps.taps];
    for (int64_t i = 0; i < count; ++i) {
      const double w = total != 0.0 ? weights[i] / total : weights[i];
      fixed[i] = static_cast<int32_t>(w < 0 ? -0.5 + w * (1 << kPrecisionBits) : 0.5 + w * (1 << kPrecisionBits));
    }
    taps.first[out] = first;
    taps.count[out] = count;
  }
  return taps;
}

uint8_t clip8(int32_t sum) { return static_cast<uint8_t>(std::clamp(sum >> kPrecisionBits, 0, 255)); }

// One pass along x (horizontal) or y: `in` is width x height x 3, the result has the axis's
// output size.
Image resample_axis(const Image& in, const Taps& taps, bool horizontal) {
  Image out;
  out.width = horizontal ? static_cast<int64_t>(taps.first.size()) : in.width;
  out.height = horizontal ? in.height : static_cast<int64_t>(taps.first.size());
  out.rgb.resize(out.width * out.height * 3);
  const int64_t step = horizontal ? 3 : in.width * 3;  // between neighbouring input samples on the axis
  for (int64_t y = 0; y < out.height; ++y) {
    for (int64_t x = 0; x < out.width; ++x) {
      const int64_t position = horizontal ? x : y;
      const int32_t* weights = &taps.weights[position * taps.taps];
      const int64_t first = taps.first[position];
      const uint8_t* source = horizontal ? &in.rgb[(y * in.width + first) * 3] : &in.rgb[(first * in.width + x) * 3];
      int32_t sums[3] = {1 << (kPrecisionBits - 1), 1 << (kPrecisionBits - 1), 1 << (kPrecisionBits - 1)};
      for (int64_t i = 0; i < taps.count[position]; ++i, source += step)
        for (int c = 0; c < 3; ++c) sums[c] += source[c] * weights[i];
      uint8_t* target = &out.rgb[(y * out.width + x) * 3];
      for (int c = 0; c < 3; ++c) target[c] = clip8(sums[c]);
    }
  }
  return out;
}

}  // namespace

Image pil_resize(const Image& image, int64_t width, int64_t height, ResampleFilter filter) {
  if (width < 1 || height < 1 || image.width < 1 || image.height < 1)
    throw std::invalid_argument("pil_resize: empty image or target size");
  const Kernel kernel = kernel_of(filter);
  const bool horizontal = width != image.width, vertical = height != image.height;
  if (!horizontal && !vertical) return Image{image.width, image.height, image.rgb, {}};
  const auto pass = [&](const Image& in, bool along_x) {
    return along_x ? resample_axis(in, precompute(image.width, width, kernel), true)
                   : resample_axis(in, precompute(image.height, height, kernel), false);
  };
  if (!horizontal || !vertical) return pass(image, horizontal);
  // The 8-bit intermediate makes the order matter. Pillow 13 (python-pillow/Pillow#9549) filters
  // vertically first when the height shrinks by more than twice as many pixels as the width does.
  const bool vertical_first = height < image.height && image.height - height > 2 * (image.width - width);
  return pass(pass(image, !vertical_first), vertical_first);
}

}  // namespace xtrain::image
