// The tensor a vision encoder takes from preprocessed pixel values (image/pixel_values.h):
// float32 [channels, height, width], owning a copy of the values.
#pragma once
#include <torch/types.h>

#include "image/pixel_values.h"

namespace xtrain::data {

torch::Tensor pixel_tensor(const image::PixelValues& pixels);

}  // namespace xtrain::data
