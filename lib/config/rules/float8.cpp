// FP8: a weight copy that serves both passes, a dtype without loss scaling, and under
// blockwise scaling tensor-parallel parts of whole blocks.
#include <utility>

#include <fmt/format.h>

#include "config/recipe_rule.h"
#include "model/spec/float8_scaling.h"

namespace xtrain::config::rules {

void float8(const RuleContext& c) {
  const auto& m = c.recipe.model;
  const auto& f = c.recipe.precision;
  if (f.fp8_all_gather == Float8AllGather::on && model::is_rowwise(f.fp8))
    c.refuse("precision.fp8_all_gather",
             fmt::format("on with precision.fp8 {}: a rowwise weight is quantized per output row for the forward "
                         "and again for the input gradient, so no one fp8 copy serves both; use tensorwise or "
                         "blockwise, or fp8_all_gather auto",
                         to_string(f.fp8)));
  if (f.fp8 == model::Float8Scaling::off) return;
  if (c.recipe.train.dtype == Dtype::fp16)
    c.refuse("precision.fp8",
             fmt::format("{} with train.dtype fp16: FP8 scales every operand from its own amax, and fp16's loss "
                         "scaling would rescale the gradients it quantizes; use train.dtype bf16 (or fp32)",
                         to_string(f.fp8)));
  const int64_t tp = c.recipe.parallel.tp;
  if (f.fp8 != model::Float8Scaling::blockwise || tp <= 1) return;
  // Each tensor-parallel part must hold whole 128 x 128 blocks of the whole weight, or its
  // blocks, and so its scales, would not be the one-process run's.
  const int64_t attention_width = m.num_heads * m.head_dim();
  for (const auto& [name, width] : {std::pair<const char*, int64_t>{"model.num_heads x head_dim", attention_width},
                                    {"model.intermediate_size", m.intermediate_size}})
    if (width > 0 && (width % tp != 0 || (width / tp) % model::kFloat8BlockEdge != 0))
      c.refuse("precision.fp8",
               fmt::format("blockwise with parallel.tp {}: {} = {} splits into parts of {} columns, not whole "
                           "{}-wide blocks; use tensorwise or rowwise, or a tp whose parts are multiples of {}",
                           tp, name, width, width / tp, model::kFloat8BlockEdge, model::kFloat8BlockEdge));
}

}  // namespace xtrain::config::rules
