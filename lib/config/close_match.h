// Which known word a mistyped one most likely meant: recipe keys ("model.hiden_size") and the
// values of a key with a fixed set of them ("qwen3-moe", "bfloat16").
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace xtrain::config {

// Levenshtein distance: insertions, deletions and substitutions of one byte each.
size_t edit_distance(const std::string& a, const std::string& b);

// The choice value most likely stands for: the same word but for case and '-' against '_', a
// PyTorch dtype name for its short form (bfloat16 for bf16), or one within a typo's edit distance
// (a third of its length, at least 1). nullopt when none is close.
std::optional<std::string> closest_choice(const std::string& value, const std::vector<std::string>& choices);

}  // namespace xtrain::config
