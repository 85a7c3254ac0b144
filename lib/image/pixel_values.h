// PixelValues: an image preprocessed for a vision encoder, float32 channels-first
// [channels, height, width] in one row-major buffer, as a plain struct so that the image layer
// needs no tensor library; lib/data/pixel_tensor.h turns it into the tensor the model takes.
#pragma once
#include <cstdint>
#include <vector>

namespace xtrain::image {

struct PixelValues {
  int64_t channels = 0;
  int64_t height = 0;
  int64_t width = 0;
  std::vector<float> values;  // channels * height * width, channel planes one after the other

  float at(int64_t channel, int64_t y, int64_t x) const { return values[(channel * height + y) * width + x]; }
};

}  // namespace xtrain::image
