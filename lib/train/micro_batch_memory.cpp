#include "train/micro_batch_memory.h"

#include <algorithm>

#include <fmt/format.h>

#include "layout/activation_memory.h"

namespace xtrain::train {
namespace {

// "244.1 GiB", "12.0 MiB": the unit that keeps the figure readable.
std::string size_text(double bytes) {
  constexpr double kMiB = 1024.0 * 1024.0, kGiB = 1024.0 * kMiB;
  return bytes >= kGiB ? fmt::format("{:.1f} GiB", bytes / kGiB) : fmt::format("{:.1f} MiB", bytes / kMiB);
}

int64_t element_bytes(const config::Recipe& recipe) {
  return layout::activation_bytes(recipe.train.dtype == config::Dtype::fp32);
}

// The largest micro batch <= limit that divides the sequences each data rank takes per step.
int64_t largest_fitting_divisor(int64_t per_rank, int64_t limit) {
  for (int64_t m = std::min(per_rank, limit); m >= 1; --m)
    if (per_rank % m == 0) return m;
  return 0;
}

}  // namespace

int64_t sequence_bytes_lower_bound(const config::Recipe& recipe, const RankShape& shape) {
  const auto& m = recipe.model;
  const int64_t tokens = recipe.data.seq_len;
  const int64_t layers = std::max<int64_t>(1, m.num_layers / shape.pp);
  // Each context-parallel rank holds 1/cp of the tokens, and sequence parallelism 1/tp of those.
  const int64_t cp = std::max<int64_t>(1, recipe.parallel.cp);
  const layout::ActivationSplit split{shape.tp, recipe.parallel.sequence_parallel, cp};
  int64_t bytes = layout::kept_block_inputs_bytes(tokens, m.hidden_size, layers, split, element_bytes(recipe));
  // Unchunked, the loss holds the fp32 logits of the last stage's tokens (vocabulary split by tp).
  if (recipe.memory.chunked_loss == "off") bytes += layout::fp32_logits_bytes(tokens / cp, m.vocab_size, shape.tp);
  return bytes;
}

std::optional<std::string> micro_batch_memory_problem(const config::Recipe& recipe, const RankShape& shape,
                                                      int64_t available_bytes, const std::string& memory_name) {
  if (available_bytes < 0) return std::nullopt;
  const int64_t per_sequence = sequence_bytes_lower_bound(recipe, shape);
  const int64_t micro = recipe.train.micro_batch_size;
  if (per_sequence <= 0 || micro * per_sequence <= available_bytes) return std::nullopt;
  const std::string need = fmt::format(
      "{} sequences of {} tokens keep at least {} alive for backward on this rank (each block's input, "
      "{} layers x hidden {} x {} bytes a token{}), more than the {} available to it ({})",
      micro, recipe.data.seq_len, size_text(static_cast<double>(micro) * per_sequence),
      std::max<int64_t>(1, recipe.model.num_layers / shape.pp), recipe.model.hidden_size, element_bytes(recipe),
      recipe.memory.chunked_loss == "off" ? ", and the unchunked logits" : "", size_text(static_cast<double>(available_bytes)), memory_name);
  const int64_t per_rank = recipe.train.global_batch_size / std::max<int64_t>(1, shape.data_ranks);
  const int64_t fitting = largest_fitting_divisor(per_rank, available_bytes / per_sequence);
  if (fitting >= 1)
    return fmt::format("{}; train.micro_batch_size {} would fit this bound (it divides the {} sequences a data rank "
                       "takes per step)",
                       need, fitting, per_rank);
  return fmt::format("{}; not even one sequence fits: shorten data.seq_len, or spread the model over more ranks "
                     "(parallel.cp, parallel.tp with sequence_parallel, parallel.pp)",
                     need);
}

}  // namespace xtrain::train
