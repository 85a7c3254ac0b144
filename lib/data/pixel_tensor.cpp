#include "data/pixel_tensor.h"

#include <torch/torch.h>

namespace xtrain::data {

torch::Tensor pixel_tensor(const image::PixelValues& pixels) {
  // from_blob borrows the buffer; the clone gives the tensor storage of its own.
  return torch::from_blob(const_cast<float*>(pixels.values.data()), {pixels.channels, pixels.height, pixels.width},
                          torch::kFloat32)
      .clone();
}

}  // namespace xtrain::data
