#include "data/image_augment.h"

#include <cmath>

#include "data/permutation.h"

namespace xtrain::data {
namespace {

// Python's round(): to the nearest, halves to even (the default floating-point rounding mode).
int64_t round_half_even(double x) { return static_cast<int64_t>(std::nearbyint(x)); }

// torchvision's RandomResizedCrop.get_params.
image::CropBox crop_box(const ImageAugment& augment, SplitMix64& random, int64_t height, int64_t width) {
  auto uniform = [&random](double low, double high) {
    return low + (high - low) * static_cast<double>(random.next() >> 11) * 0x1.0p-53;
  };
  const double area = static_cast<double>(height * width);
  const double log_low = std::log(augment.crop_ratio[0]), log_high = std::log(augment.crop_ratio[1]);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * uniform(augment.crop_scale[0], augment.crop_scale[1]);
    const double aspect = std::exp(uniform(log_low, log_high));
    const int64_t w = round_half_even(std::sqrt(target * aspect)), h = round_half_even(std::sqrt(target / aspect));
    if (0 < w && w <= width && 0 < h && h <= height) {
      const auto top = static_cast<int64_t>(random.below(static_cast<uint64_t>(height - h + 1)));
      const auto left = static_cast<int64_t>(random.below(static_cast<uint64_t>(width - w + 1)));
      return {top, left, h, w};
    }
  }
  // The centre crop of the ratio range's nearest end.
  const double ratio = static_cast<double>(width) / static_cast<double>(height);
  int64_t w = width, h = height;
  if (ratio < augment.crop_ratio[0]) {
    h = round_half_even(static_cast<double>(w) / augment.crop_ratio[0]);
  } else if (ratio > augment.crop_ratio[1]) {
    w = round_half_even(static_cast<double>(h) * augment.crop_ratio[1]);
  }
  return {(height - h) / 2, (width - w) / 2, h, w};
}

}  // namespace

AugmentDraw draw_augment(const ImageAugment& augment, uint64_t seed, int64_t global_index, int64_t height,
                         int64_t width) {
  // (seed, index) hashed into the state, as random_permutation does, so that nearby pairs give
  // unrelated draws; the tag keeps them apart from the sample order's.
  constexpr uint64_t kTag = 0x61756775'6d656e74ULL;  // "augment"
  SplitMix64 random(SplitMix64(SplitMix64(seed ^ kTag).next() + static_cast<uint64_t>(global_index)).next());
  AugmentDraw draw;
  draw.box = augment.crop_scale.empty() ? image::CropBox{0, 0, height, width}
                                        : crop_box(augment, random, height, width);
  if (augment.hflip > 0)
    draw.flipped = static_cast<double>(random.next() >> 11) * 0x1.0p-53 < augment.hflip;
  return draw;
}

}  // namespace xtrain::data
