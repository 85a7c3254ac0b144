#include "train/spike_detector.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace xtrain::train {
namespace {

constexpr double kMinRelativeDeviation = 0.01;

void push(std::deque<double>& history, double value, int64_t window) {
  history.push_back(value);
  while (static_cast<int64_t>(history.size()) > window) history.pop_front();
}

}  // namespace

std::string Spike::describe() const {
  return fmt::format("{} {:.4g} is {:.1f} standard deviations above the mean {:.4g} of the last {} steps", quantity,
                     value, zscore, mean, window);
}

std::optional<Spike> SpikeDetector::check_one(const std::deque<double>& history, double value,
                                              const char* quantity) const {
  if (static_cast<int64_t>(history.size()) < window_ || !std::isfinite(value)) return std::nullopt;
  double mean = 0;
  for (const double x : history) mean += x;
  mean /= static_cast<double>(history.size());
  double variance = 0;
  for (const double x : history) variance += (x - mean) * (x - mean);
  variance /= static_cast<double>(history.size() - 1);
  const double deviation = std::max({std::sqrt(variance), kMinRelativeDeviation * std::abs(mean), 1e-12});
  const double z = (value - mean) / deviation;
  if (z <= zscore_) return std::nullopt;
  return Spike{quantity, value, mean, z, window_};
}

std::optional<Spike> SpikeDetector::check(double loss, double grad_norm) const {
  if (auto spike = check_one(losses_, loss, "loss")) return spike;
  return check_one(grad_norms_, grad_norm, "gradient norm");
}

void SpikeDetector::add(double loss, double grad_norm) {
  if (std::isfinite(loss)) push(losses_, loss, window_);
  if (std::isfinite(grad_norm)) push(grad_norms_, grad_norm, window_);
}

}  // namespace xtrain::train
