#include "data/prompt_dataset.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "data/jsonl_objects.h"
#include "text/chat_template.h"
#include "util/input_error.h"

namespace xtrain::data {

namespace {

constexpr const char* kPromptFormat =
    "each line of a prompt file is {\"prompt\": \"...\", \"answer\": \"...\"}, or the same with \"prompt\" a list of "
    "{\"role\", \"content\"} messages (docs/post-training.md)";

std::vector<text::ChatMessage> prompt_messages(const nlohmann::json& list, const std::string& where) {
  std::vector<text::ChatMessage> messages;
  for (const auto& message : list) {
    const auto role = message.is_object() ? message.find("role") : message.end();
    const auto content = message.is_object() ? message.find("content") : message.end();
    if (!message.is_object() || role == message.end() || content == message.end() || !role->is_string() ||
        !content->is_string())
      throw InputError(fmt::format("{}: \"prompt\" has a message that is not {{\"role\": \"...\", \"content\": "
                                   "\"...\"}}: {}",
                                   where, kPromptFormat));
    messages.push_back({role->get<std::string>(), content->get<std::string>()});
  }
  if (messages.empty())
    throw InputError(fmt::format("{}: \"prompt\" is an empty list: give it the messages a completion answers", where));
  return messages;
}

// The text a completion continues: a plain prompt as written; messages with the chat template,
// followed by the assistant's prefix.
std::string prompt_text(const nlohmann::json& prompt, const text::ChatTemplate& chat, const std::string& where) {
  if (prompt.is_string()) {
    auto text = prompt.get<std::string>();
    if (text.empty())
      throw InputError(fmt::format("{}: \"prompt\" is empty: a completion continues a prompt; fill it in or leave "
                                   "the record out",
                                   where));
    return text;
  }
  if (!prompt.is_array())
    throw InputError(fmt::format("{}: \"prompt\" is {}, not a string or a list of messages: {}", where,
                                 prompt.type_name(), kPromptFormat));
  return chat.generation_prompt(prompt_messages(prompt, where));
}

void read_answer(const nlohmann::json& record, PromptRecord& out, const std::string& where,
                 const std::string& needed_by) {
  const auto answer = record.find("answer");
  if (answer == record.end() || answer->is_null()) {
    if (!needed_by.empty())
      throw InputError(fmt::format("{}: the record has no \"answer\", and {} compares each completion to it: add "
                                   "\"answer\" to every record, or take that reward out",
                                   where, needed_by));
    return;
  }
  if (answer->is_string())
    out.answer = answer->get<std::string>();
  else if (answer->is_number())
    out.answer = answer->dump();
  else
    throw InputError(fmt::format("{}: \"answer\" is {}, not a string or a number: {}", where, answer->type_name(),
                                 kPromptFormat));
  out.has_answer = true;
}

}  // namespace

std::vector<PromptRecord> read_prompts(const std::string& path, const text::Tokenizer& tokenizer,
                                       const PromptReadOptions& options) {
  const auto chat = text::ChatTemplate::parse(options.chat_template);
  const int64_t room = options.seq_len - options.max_new_tokens;
  std::vector<PromptRecord> records;
  for_each_jsonl_object(path, "prompt file", kPromptFormat, [&](const nlohmann::json& record, const std::string& where,
                                                                int64_t number) {
    const auto prompt = record.find("prompt");
    if (prompt == record.end()) throw InputError(fmt::format("{}: the record has no \"prompt\": {}", where, kPromptFormat));
    PromptRecord out;
    out.line = number;
    out.prompt_text = prompt_text(*prompt, chat, where);
    out.prompt_json = prompt->dump();
    read_answer(record, out, where, options.answer_needed_by);
    out.prompt = tokenizer.encode(out.prompt_text);
    const auto tokens = static_cast<int64_t>(out.prompt.size());
    if (tokens > room)
      throw InputError(fmt::format("{}: the prompt is {} tokens, and data.seq_len {} less grpo.max_new_tokens {} "
                                   "leaves {} for it: raise data.seq_len to at least {}, lower grpo.max_new_tokens, "
                                   "or shorten the prompt",
                                   where, tokens, options.seq_len, options.max_new_tokens, room,
                                   tokens + options.max_new_tokens));
    records.push_back(std::move(out));
  });
  if (records.empty()) throw InputError(fmt::format("{}: no prompt records: {}", path, kPromptFormat));
  return records;
}

PromptDataset::PromptDataset(std::vector<PromptRecord> records, uint64_t seed, bool shuffle)
    : records_(std::move(records)), order_(seed, shuffle) {}

const PromptRecord& PromptDataset::at(int64_t global_index) const {
  return records_[static_cast<size_t>(order_.sample(global_index, size()))];
}

}  // namespace xtrain::data
