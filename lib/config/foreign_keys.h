// Keys that other trainers and Hugging Face configs use for what xtrain spells otherwise
// (transformers' TrainingArguments, config.json fields, Megatron and torchtitan arguments).
// A recipe written from memory of one of them gets the xtrain key in its error, not only
// "unknown key": edit distance cannot link learning_rate to optim.lr.
#pragma once
#include <optional>
#include <string>

namespace xtrain::config {

// The hint for an unknown key whose last part is a foreign name ("training.learning_rate"),
// e.g. "did you mean optim.lr?"; nullopt when it is no name we know.
std::optional<std::string> foreign_key_hint(const std::string& path);

}  // namespace xtrain::config
