#include "config/close_match.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string_view>
#include <utility>

namespace xtrain::config {
namespace {

std::string folded(const std::string& word) {
  std::string out = word;
  for (char& c : out) c = c == '-' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// torch.dtype spellings of train.dtype's values.
constexpr std::array<std::pair<std::string_view, std::string_view>, 6> kDtypeNames{{
    {"bfloat16", "bf16"},
    {"float16", "fp16"},
    {"half", "fp16"},
    {"float32", "fp32"},
    {"float", "fp32"},
    {"single", "fp32"},
}};

}  // namespace

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::optional<std::string> closest_choice(const std::string& value, const std::vector<std::string>& choices) {
  const std::string key = folded(value);
  for (const auto& choice : choices)
    if (folded(choice) == key) return choice;
  for (const auto& [name, short_name] : kDtypeNames)
    if (key == name && std::find(choices.begin(), choices.end(), short_name) != choices.end())
      return std::string(short_name);
  std::optional<std::string> best;
  size_t best_distance = std::max<size_t>(1, value.size() / 3) + 1;
  for (const auto& choice : choices)
    if (const size_t distance = edit_distance(key, folded(choice)); distance < best_distance) {
      best_distance = distance;
      best = choice;
    }
  return best;
}

}  // namespace xtrain::config
