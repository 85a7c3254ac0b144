#include "train/grpo_token_means.h"

#include <algorithm>
#include <stdexcept>

namespace xtrain::train {

bool is_grpo_token_mean(const std::string& name) {
  return name == "kl" || name == "clip_ratio/low_mean" || name == "clip_ratio/high_mean" ||
         name == "clip_ratio/region_mean";
}

std::map<std::string, double> pooled_token_means(const std::map<std::string, std::vector<double>>& sums,
                                                 const std::vector<double>& tokens) {
  std::map<std::string, double> means;
  for (const auto& [name, figure] : sums) {
    if (figure.size() != tokens.size())
      throw std::invalid_argument("pooled_token_means: " + name + " has not one sum a micro batch");
    double total = 0;
    for (size_t k = 0; k < tokens.size(); ++k) total += figure[k] / std::max(tokens[k], 1.0);
    means[name] = tokens.empty() ? 0.0 : total / static_cast<double>(tokens.size());
  }
  return means;
}

std::map<std::string, double> token_means_over_ranks(const std::map<std::string, std::vector<double>>& means,
                                                     const std::vector<double>& tokens, double share, RankSums& sums) {
  // One vector: the token counts, then each figure's token sums (mean x count), in name order,
  // which every rank shares.
  std::vector<double> mine;
  for (const double count : tokens) mine.push_back(count * share);
  for (const auto& [name, figure] : means) {
    if (figure.size() != tokens.size())
      throw std::invalid_argument("token_means_over_ranks: " + name + " has not one mean a micro batch");
    for (size_t k = 0; k < tokens.size(); ++k) mine.push_back(figure[k] * tokens[k] * share);
  }
  const auto summed = sums.sum(std::move(mine));
  const auto micro = static_cast<std::ptrdiff_t>(tokens.size());
  const std::vector<double> all_tokens(summed.begin(), summed.begin() + micro);
  std::map<std::string, std::vector<double>> token_sums;
  auto at = summed.begin() + micro;
  for (const auto& entry : means) {
    token_sums[entry.first].assign(at, at + micro);
    at += micro;
  }
  return pooled_token_means(token_sums, all_tokens);
}

}  // namespace xtrain::train
