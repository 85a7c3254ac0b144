#include "data/preference_dataset.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "data/jsonl_objects.h"
#include "text/chat_template.h"
#include "util/input_error.h"

namespace xtrain::data {

namespace {

constexpr const char* kFormat =
    "each line of a preference file is {\"prompt\": \"...\", \"chosen\": \"...\", \"rejected\": \"...\"}, or the "
    "same with lists of {\"role\", \"content\"} messages (docs/post-training.md)";

const nlohmann::json& field_of(const nlohmann::json& record, const char* name, const std::string& where) {
  const auto field = record.find(name);
  if (field == record.end())
    throw InputError(fmt::format("{}: the record has no \"{}\": {}", where, name, kFormat));
  if (!field->is_string() && !field->is_array())
    throw InputError(fmt::format("{}: \"{}\" is {}, not a string or a list of messages: {}", where, name,
                                 field->type_name(), kFormat));
  return *field;
}

std::vector<text::ChatMessage> messages_of(const nlohmann::json& list, const char* name, const std::string& where) {
  std::vector<text::ChatMessage> messages;
  for (const auto& message : list) {
    const auto role = message.is_object() ? message.find("role") : message.end();
    const auto content = message.is_object() ? message.find("content") : message.end();
    if (!message.is_object() || role == message.end() || content == message.end() || !role->is_string() ||
        !content->is_string())
      throw InputError(fmt::format("{}: \"{}\" has a message that is not {{\"role\": \"...\", \"content\": "
                                   "\"...\"}}: {}",
                                   where, name, kFormat));
    messages.push_back({role->get<std::string>(), content->get<std::string>()});
  }
  return messages;
}

[[noreturn]] void empty_completion(const char* name, const std::string& where) {
  throw InputError(fmt::format(
      "{}: \"{}\" is empty: a preference pair compares two non-empty completions; fill it in or leave the record out",
      where, name));
}

// A plain record: the prompt's text; each completion's, which EOS follows (as TRL adds it).
// A conversational one (TRL's too): the prompt's messages with the assistant's prefix (a
// generation prompt), and each completion as the rest of the whole conversation's rendering,
// its end-of-turn marker included, without EOS.
struct RecordText {
  std::string prompt, chosen, rejected;
  bool eos = true;
};

RecordText record_text(const nlohmann::json& record, const text::ChatTemplate& chat, const std::string& where) {
  const auto& prompt = field_of(record, "prompt", where);
  const auto& chosen = field_of(record, "chosen", where);
  const auto& rejected = field_of(record, "rejected", where);
  if (prompt.is_string() != chosen.is_string() || prompt.is_string() != rejected.is_string())
    throw InputError(fmt::format("{}: \"prompt\", \"chosen\" and \"rejected\" must be all strings or all lists of "
                                 "messages: {}",
                                 where, kFormat));
  if (prompt.is_string()) {
    RecordText text{prompt.get<std::string>(), chosen.get<std::string>(), rejected.get<std::string>(), true};
    if (text.chosen.empty()) empty_completion("chosen", where);
    if (text.rejected.empty()) empty_completion("rejected", where);
    return text;
  }
  const auto prompt_messages = messages_of(prompt, "prompt", where);
  RecordText text{chat.generation_prompt(prompt_messages), {}, {}, false};
  auto completion = [&](const nlohmann::json& list, const char* name) {
    const auto answer = messages_of(list, name, where);
    if (std::all_of(answer.begin(), answer.end(), [](const auto& m) { return m.content.empty(); }))
      empty_completion(name, where);
    auto conversation = prompt_messages;
    conversation.insert(conversation.end(), answer.begin(), answer.end());
    std::string whole;
    for (const auto& segment : chat.render(conversation)) whole += segment.text;
    if (whole.compare(0, text.prompt.size(), text.prompt) != 0)
      throw InputError(fmt::format("{}: data.chat_template writes the prompt otherwise before \"{}\" than alone: "
                                   "start \"{}\" with an assistant message",
                                   where, name, name));
    return whole.substr(text.prompt.size());
  };
  text.chosen = completion(chosen, "chosen");
  text.rejected = completion(rejected, "rejected");
  return text;
}

std::vector<int64_t> completion_ids(const text::Tokenizer& tokenizer, const std::string& text, bool eos) {
  auto ids = tokenizer.encode(text);
  if (eos) ids.push_back(tokenizer.eos_id());
  return ids;
}

}  // namespace

std::vector<PreferencePair> read_preference_pairs(const std::string& path, const text::Tokenizer& tokenizer,
                                                  int64_t seq_len, const std::string& chat_template) {
  const auto chat = text::ChatTemplate::parse(chat_template);
  std::vector<PreferencePair> pairs;
  for_each_jsonl_object(path, "preference file", kFormat, [&](const nlohmann::json& record, const std::string& where,
                                                              int64_t) {
    const auto text = record_text(record, chat, where);
    PreferencePair pair;
    pair.prompt = tokenizer.encode(text.prompt);
    pair.chosen = completion_ids(tokenizer, text.chosen, text.eos);
    pair.rejected = completion_ids(tokenizer, text.rejected, text.eos);
    const auto prompt_tokens = static_cast<int64_t>(pair.prompt.size());
    if (prompt_tokens >= seq_len)
      throw InputError(fmt::format("{}: the prompt is {} tokens, and data.seq_len {} leaves no room for a completion "
                                   "after it: raise data.seq_len above {}, or shorten the prompt",
                                   where, prompt_tokens, seq_len, prompt_tokens));
    pairs.push_back(std::move(pair));
  });
  if (pairs.empty()) throw InputError(fmt::format("{}: no preference records: {}", path, kFormat));
  return pairs;
}

PreferenceDataset::PreferenceDataset(std::vector<PreferencePair> pairs, int64_t seq_len, int64_t pad_id,
                                     uint64_t seed, bool shuffle)
    : pairs_(std::move(pairs)), seq_len_(seq_len), pad_id_(pad_id), order_(seed, shuffle) {
  for (const auto& pair : pairs_)
    tokens_ += static_cast<int64_t>(2 * pair.prompt.size() + pair.chosen.size() + pair.rejected.size());
}

PreferenceDataset::Row PreferenceDataset::row(int64_t global_index) const {
  // Rows 2p and 2p + 1 are pair p's chosen and rejected completions.
  const auto& pair = pairs_[static_cast<size_t>(order_.sample(global_index / 2, static_cast<int64_t>(pairs_.size())))];
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
