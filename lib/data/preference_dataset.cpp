#include "data/preference_dataset.h"

#include <algorithm>
#include <fstream>
#include <mutex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "data/permutation.h"
#include "util/input_error.h"

namespace xtrain::data {

namespace {

constexpr const char* kFormat =
    "each line of a preference file is {\"prompt\": \"...\", \"chosen\": \"...\", \"rejected\": \"...\"} "
    "(docs/post-training.md)";

std::string text_field(const nlohmann::json& record, const char* name, const std::string& where) {
  const auto field = record.find(name);
  if (field == record.end())
    throw InputError(fmt::format("{}: the record has no \"{}\": {}", where, name, kFormat));
  if (!field->is_string())
    throw InputError(fmt::format("{}: \"{}\" is {}, not a string (conversational preference records are not read "
                                 "yet): {}",
                                 where, name, field->type_name(), kFormat));
  return field->get<std::string>();
}

std::vector<int64_t> completion(const text::Tokenizer& tokenizer, const std::string& text, const char* name,
                                const std::string& where) {
  if (text.empty())
    throw InputError(fmt::format(
        "{}: \"{}\" is empty: a preference pair compares two non-empty completions; fill it in or leave the record out",
        where, name));
  auto ids = tokenizer.encode(text);
  ids.push_back(tokenizer.eos_id());
  return ids;
}

}  // namespace

std::vector<PreferencePair> read_preference_pairs(const std::string& path, const text::Tokenizer& tokenizer,
                                                  int64_t seq_len) {
  std::ifstream in(path);
  if (!in) throw InputError(fmt::format("{}: cannot read the preference file", path));
  std::vector<PreferencePair> pairs;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const auto where = fmt::format("{}:{}", path, number);
    nlohmann::json record;
    try {
      record = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& error) {
      throw InputError(fmt::format("{}: invalid JSON at column {}: {}", where, error.byte, kFormat));
    }
    if (!record.is_object()) throw InputError(fmt::format("{}: not a JSON object: {}", where, kFormat));
    PreferencePair pair;
    pair.prompt = tokenizer.encode(text_field(record, "prompt", where));
    pair.chosen = completion(tokenizer, text_field(record, "chosen", where), "chosen", where);
    pair.rejected = completion(tokenizer, text_field(record, "rejected", where), "rejected", where);
    const auto prompt_tokens = static_cast<int64_t>(pair.prompt.size());
    if (prompt_tokens >= seq_len)
      throw InputError(fmt::format("{}: the prompt is {} tokens, and data.seq_len {} leaves no room for a completion "
                                   "after it: raise data.seq_len above {}, or shorten the prompt",
                                   where, prompt_tokens, seq_len, prompt_tokens));
    pairs.push_back(std::move(pair));
  }
  if (pairs.empty()) throw InputError(fmt::format("{}: no preference records: {}", path, kFormat));
  return pairs;
}

PreferenceDataset::PreferenceDataset(std::vector<PreferencePair> pairs, int64_t seq_len, int64_t pad_id,
                                     uint64_t seed, bool shuffle)
    : pairs_(std::move(pairs)), seq_len_(seq_len), pad_id_(pad_id), seed_(seed), shuffle_(shuffle) {
  for (const auto& pair : pairs_)
    tokens_ += static_cast<int64_t>(2 * pair.prompt.size() + pair.chosen.size() + pair.rejected.size());
}

PreferenceDataset::Row PreferenceDataset::row(int64_t global_index) const {
  const auto count = static_cast<int64_t>(pairs_.size());
  const int64_t pair_index = global_index / 2;
  int64_t position = pair_index % count;
  if (shuffle_) {
    // One permutation per epoch, kept while rows of that epoch are read.
    const int64_t epoch = pair_index / count;
    std::lock_guard<std::mutex> lock(permutation_mutex_);
    if (permutation_epoch_ != epoch) {
      permutation_ = random_permutation(count, seed_, static_cast<uint64_t>(epoch));
      permutation_epoch_ = epoch;
    }
    position = permutation_[static_cast<size_t>(position)];
  }
  const auto& pair = pairs_[static_cast<size_t>(position)];
  const auto& answer = global_index % 2 == 0 ? pair.chosen : pair.rejected;
  Row out;
  out.tokens = pair.prompt;
  out.tokens.insert(out.tokens.end(), answer.begin(), answer.end());
  out.prompt = static_cast<int64_t>(pair.prompt.size());
  out.end = std::min<int64_t>(static_cast<int64_t>(out.tokens.size()), seq_len_ + 1);
  out.tokens.resize(static_cast<size_t>(seq_len_ + 1), pad_id_);
  return out;
}

torch::Tensor PreferenceDataset::batch(int64_t first_global_index, int64_t count) const {
  auto out = torch::empty({count, seq_len_ + 1}, torch::kInt64);
  auto* data = out.data_ptr<int64_t>();
  for (int64_t i = 0; i < count; ++i) {
    const auto tokens = row(first_global_index + i).tokens;
    std::copy(tokens.begin(), tokens.end(), data + i * (seq_len_ + 1));
  }
  return out;
}

// Target t is token t + 1: a target where that token is the completion's, not the prompt's or
// padding. With an empty prompt the completion's first token has nothing before it (as in TRL).
torch::Tensor PreferenceDataset::targets(int64_t first_global_index, int64_t count) const {
  auto out = torch::full({count, seq_len_}, kIgnoreIndex, torch::kInt64);
  auto* data = out.data_ptr<int64_t>();
  for (int64_t i = 0; i < count; ++i) {
    const auto r = row(first_global_index + i);
    for (int64_t t = std::max<int64_t>(r.prompt, 1); t < r.end; ++t)
      data[i * seq_len_ + t - 1] = r.tokens[static_cast<size_t>(t)];
  }
  return out;
}

}  // namespace xtrain::data
