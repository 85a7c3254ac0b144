// precision.fp8: how FP8 operands are scaled (model/layers/float8.h), apart from the tensor code so that
// the recipe schema can name it.
#pragma once
#include <cstdint>

#include "util/choice.h"

namespace xtrain::model {

enum class Float8Scaling { off, tensorwise, rowwise, rowwise_with_gw_hp, blockwise };  // precision.fp8

XTRAIN_CHOICES_BEGIN
constexpr const char* to_string(Float8Scaling value) {
  switch (value) {
    case Float8Scaling::off: return "off";
    case Float8Scaling::tensorwise: return "tensorwise";
    case Float8Scaling::rowwise: return "rowwise";
    case Float8Scaling::rowwise_with_gw_hp: return "rowwise_with_gw_hp";
    case Float8Scaling::blockwise: return "blockwise";
  }
  return nullptr;
}
XTRAIN_CHOICES_END

// torchao's two rowwise recipes: power-of-two scales, and a weight quantized per output row for the
// forward and again for the input gradient.
constexpr bool is_rowwise(Float8Scaling scaling) {
  return scaling == Float8Scaling::rowwise || scaling == Float8Scaling::rowwise_with_gw_hp;
}

// DeepSeek-V3's tile and block edge (blockwise scaling).
inline constexpr int64_t kFloat8BlockEdge = 128;

}  // namespace xtrain::model
