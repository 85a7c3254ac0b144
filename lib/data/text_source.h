// Text sources: where a recipe's `data.train` / `data.eval` documents come from.
//   builtin:demo       the demo corpus embedded in the binary (all but its last 5%)
//   builtin:demo-eval  the last 5% of the demo corpus, held out for evaluation
//   PATH.jsonl         one JSON object per line with a string field "text"
//   PATH (directory)   every regular file in it, sorted by name, each file one document
//   PATH (file)        plain UTF-8 text, one document
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace xtrain::data {

// Loads all documents. Problems (missing path, bad JSONL line, missing "text") throw
// InputError naming the file and line.
std::vector<std::string> load_documents(const std::string& spec);

// Cheap check used by recipe validation: nullopt if the source exists, else the problem
// ("file not found: data/x.txt").
std::optional<std::string> check_source(const std::string& spec);

}  // namespace xtrain::data
