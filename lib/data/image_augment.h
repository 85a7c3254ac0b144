// The training augmentation of image classifiers (model.family vit), as torchvision's
// RandomResizedCrop(size, scale, ratio) then RandomHorizontalFlip(p) on a PIL image: a box of
// a random share of the image's area (data.crop_scale) and aspect ratio (data.crop_ratio, drawn
// log-uniform) is cropped and resized to the model's square with Pillow's bilinear filter, then
// mirrored with probability data.hflip. The box follows torchvision's get_params step for step
// (ten tries, sides rounded half to even as Python's round, then its centre-crop fallback), so a
// reference that is given the same box and flip computes the same pixels.
//
// The draws are a pure function of (seed, global sample index), not of a generator a rank
// advances: every layout, and every resume, crops each sample as one process does, and a sample
// read again in another epoch (another global index) is cropped anew.
#pragma once
#include <cstdint>
#include <vector>

#include "image/image_geometry.h"

namespace xtrain::data {

struct ImageAugment {
  std::vector<double> crop_scale;  // [min, max] of the area; empty: no crop (the whole image)
  std::vector<double> crop_ratio;  // [min, max] of width / height
  double hflip = 0;                // probability of a left-right mirror

  bool any() const { return !crop_scale.empty() || hflip > 0; }
};

struct AugmentDraw {
  image::CropBox box;  // the whole image when the augmentation crops nothing
  bool flipped = false;
};

AugmentDraw draw_augment(const ImageAugment& augment, uint64_t seed, int64_t global_index, int64_t height,
                         int64_t width);

}  // namespace xtrain::data
