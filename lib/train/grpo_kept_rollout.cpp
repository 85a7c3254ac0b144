#include "train/grpo_kept_rollout.h"

#include <algorithm>

#include <fmt/format.h>
#include <torch/torch.h>

#include "util/input_error.h"

namespace xtrain::train {

namespace {

int64_t length_of(const std::vector<double>& totals, int64_t rows, int64_t row) {
  return static_cast<int64_t>(totals[static_cast<size_t>(rows + row)]);
}

int64_t widest(const std::vector<double>& totals, int64_t rows) {
  int64_t width = 0;
  for (int64_t row = 0; row < rows; ++row) width = std::max(width, length_of(totals, rows, row));
  return width;
}

}  // namespace

// Rows right-padded to the longest completion: tokens with -1, log-probabilities with 0.
ckpt::TensorMap KeptRollout::tensors() const {
  const auto rows = static_cast<int64_t>(completions.size());
  const int64_t width = widest(totals, rows);
  auto tokens = torch::full({rows, width}, -1, torch::kInt64);
  auto logps = torch::zeros({rows, width}, torch::kFloat32);
  for (int64_t row = 0; row < rows; ++row) {
    const auto& completion = completions[static_cast<size_t>(row)];
    const auto n = static_cast<int64_t>(completion.size());
    if (n == 0) continue;
    tokens[row].slice(0, 0, n).copy_(torch::tensor(completion, torch::kInt64));
    logps[row].slice(0, 0, n).copy_(torch::tensor(old_logps[static_cast<size_t>(row)], torch::kFloat32));
  }
  return {{"completions", tokens}, {"old_logps", logps}, {"totals", torch::tensor(totals, torch::kFloat64)}};
}

ckpt::Metadata KeptRollout::metadata() const { return {{"rollout", std::to_string(rollout)}}; }

KeptRollout gather_kept_rollout(int64_t rollout, int64_t rows, const std::vector<double>& totals,
                                const std::vector<int64_t>& mine, const std::vector<std::vector<int64_t>>& completions,
                                const std::vector<std::vector<float>>& old_logps, RankSums& sums) {
  const int64_t width = widest(totals, rows);
  // Tokens, then log-probabilities, each [rows, width]; a float converts to a double and back exactly.
  std::vector<double> joined(static_cast<size_t>(2 * rows * width), 0.0);
  for (size_t i = 0; i < mine.size(); ++i)
    for (size_t t = 0; t < completions[i].size(); ++t) {
      const auto at = static_cast<size_t>(mine[i] * width) + t;
      joined[at] = static_cast<double>(completions[i][t]);
      joined[static_cast<size_t>(rows * width) + at] = static_cast<double>(old_logps[i][t]);
    }
  joined = sums.sum(std::move(joined));
  KeptRollout kept{rollout, totals, {}, {}};
  for (int64_t row = 0; row < rows; ++row) {
    const auto first = joined.begin() + row * width;
    const auto n = length_of(totals, rows, row);
    kept.completions.emplace_back(first, first + n);
    kept.old_logps.emplace_back(first + rows * width, first + rows * width + n);
  }
  return kept;
}

KeptRollout read_kept_rollout(const std::string& path, int64_t rows, int64_t totals_size) {
  auto file = ckpt::load_safetensors(path);
  auto tensor = [&](const char* name) {
    const auto found = file.tensors.find(name);
    if (found == file.tensors.end())
      throw InputError(fmt::format("{}: no tensor '{}' (the file is damaged: resume from an earlier checkpoint)", path,
                                   name));
    return found->second;
  };
  const auto tokens = tensor("completions"), logps = tensor("old_logps"), totals = tensor("totals");
  const auto rollout = file.metadata.find("rollout");
  if (tokens.dim() != 2 || tokens.size(0) != rows || logps.sizes() != tokens.sizes() || totals.dim() != 1 ||
      totals.size(0) != totals_size || rollout == file.metadata.end())
    throw InputError(fmt::format("{}: a rollout of {} completion rows and {} figures, where the recipe's rollout has "
                                 "{} rows (train.global_batch_size x grpo.steps_per_rollout) and {}: resume with the "
                                 "checkpoint's grpo and train settings",
                                 path, tokens.dim() == 2 ? tokens.size(0) : -1, totals.numel(), rows, totals_size));
  KeptRollout kept;
  kept.rollout = std::stoll(rollout->second);
  const auto t = totals.contiguous().to(torch::kFloat64);
  kept.totals.assign(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
  const auto all_tokens = tokens.contiguous().to(torch::kInt64);
  const auto all_logps = logps.contiguous().to(torch::kFloat32);
  for (int64_t row = 0; row < rows; ++row) {
    const auto n = length_of(kept.totals, rows, row);
    if (n > tokens.size(1))
      throw InputError(fmt::format("{}: row {} is {} tokens long in 'totals' and at most {} in 'completions' (the file "
                                   "is damaged: resume from an earlier checkpoint)",
                                   path, row, n, tokens.size(1)));
    const auto* token = all_tokens[row].data_ptr<int64_t>();
    const auto* logp = all_logps[row].data_ptr<float>();
    kept.completions.emplace_back(token, token + n);
    kept.old_logps.emplace_back(logp, logp + n);
  }
  return kept;
}

}  // namespace xtrain::train
