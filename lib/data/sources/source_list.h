// The value of data.train / data.eval: one source, or a weighted blend of sources, written in a
// recipe as a list:
//   data:
//     train:
//       - {path: megatron:/data/web, weight: 0.7}
//       - {path: chat.jsonl, weight: 0.3}
// Weights are relative (normalised to sum 1; default 1). The recipe holds a list as the YAML
// flow text that encode_source_list writes ("[{path: ..., weight: 0.7}, ...]") and a single
// source as itself, so the value stays one string and a dumped recipe reloads the same list.
#pragma once
#include <string>
#include <vector>

namespace xtrain::data {

struct WeightedSource {
  std::string path;
  double weight = 1.0;
};

// Whether spec is the text of a list (it starts with "[").
bool is_source_list(const std::string& spec);
// A single source is one entry of weight 1. A malformed list is an InputError naming the item
// and what it should be.
std::vector<WeightedSource> parse_source_list(const std::string& spec);
std::string encode_source_list(const std::vector<WeightedSource>& sources);

}  // namespace xtrain::data
