#include "text/chat_template.h"

#include <algorithm>

#include "util/input_error.h"

namespace xtrain::text {
namespace {

constexpr const char* kSyntax =
    "expected chatml, llama3, or entries ROLE=PREFIX{content}SUFFIX separated by ; (see docs/data.md, Chat data and the loss mask)";
constexpr const char* kAssistant = "assistant";
constexpr const char* kWhitespace = " \t\r\n";

// Splits at single ";" and turns ";;" into ";".
std::vector<std::string> split_entries(const std::string& spec) {
  std::vector<std::string> entries(1);
  for (size_t i = 0; i < spec.size(); ++i) {
    if (spec[i] != ';') {
      entries.back() += spec[i];
    } else if (i + 1 < spec.size() && spec[i + 1] == ';') {
      entries.back() += ';';
      ++i;
    } else {
      entries.emplace_back();
    }
  }
  return entries;
}

std::string unescape(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size()) {
      const char next = text[i + 1];
      if (next == 'n' || next == 't' || next == '\\') {
        out += next == 'n' ? '\n' : next == 't' ? '\t' : '\\';
        ++i;
        continue;
      }
    }
    out += text[i];
  }
  return out;
}

std::string trim(const std::string& text) {
  const size_t first = text.find_first_not_of(kWhitespace);
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(kWhitespace) - first + 1);
}

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

const char* const kChatml = "*=<|im_start|>{role}\\n{content}<|im_end|>\\n";
const char* const kLlama3 = "begin=<|begin_of_text|>;*=<|start_header_id|>{role}<|end_header_id|>\\n\\n{content}<|eot_id|>";

}  // namespace

ChatTemplate ChatTemplate::parse(const std::string& spec) {
  if (spec == "chatml") return parse(kChatml);
  if (spec == "llama3") {
    ChatTemplate llama3 = parse(kLlama3);
    llama3.trim_content_ = true;
    return llama3;
  }
  if (spec.find('=') == std::string::npos)
    throw InputError("unknown chat template '" + spec + "' (" + kSyntax + ")");
  ChatTemplate result;
  bool has_begin = false;
  for (const std::string& entry : split_entries(spec)) {
    if (trim(entry).empty()) continue;  // a trailing ";"
    const size_t equals = entry.find('=');
    const std::string name = trim(entry.substr(0, equals == std::string::npos ? 0 : equals));
    if (equals == std::string::npos || name.empty())
      throw InputError("chat template entry '" + entry + "' has no NAME= (" + kSyntax + ")");
    const std::string value = unescape(entry.substr(equals + 1));
    if (name == "begin") {
      if (has_begin) throw InputError("chat template: begin= is given twice");
      has_begin = true;
      result.begin_ = value;
      continue;
    }
    const size_t content = value.find("{content}");
    if (content == std::string::npos || value.find("{content}", content + 1) != std::string::npos)
      throw InputError("chat template entry for '" + name + "' must contain {content} exactly once, got '" + value + "'");
    if (result.format_for(name) && result.format_for(name)->role == name)
      throw InputError("chat template: role '" + name + "' is given twice");
    result.roles_.push_back({name, value.substr(0, content), value.substr(content + 9)});
  }
  if (result.roles_.empty()) throw InputError("chat template '" + spec + "' defines no role (" + kSyntax + ")");
  return result;
}

const ChatTemplate::RoleFormat* ChatTemplate::format_for(const std::string& role) const {
  const RoleFormat* fallback = nullptr;
  for (const auto& format : roles_) {
    if (format.role == role) return &format;
    if (format.role == "*") fallback = &format;
  }
  return fallback;
}

std::vector<TextSegment> ChatTemplate::render(const std::vector<ChatMessage>& messages) const {
  std::vector<TextSegment> segments;
  auto add = [&segments](std::string text, bool loss) {
    if (text.empty()) return;
    if (!segments.empty() && segments.back().loss == loss)
      segments.back().text += text;
    else
      segments.push_back({std::move(text), loss});
  };
  add(begin_, false);
  for (const auto& message : messages) {
    const RoleFormat* format = format_for(message.role);
    if (!format) {
      std::string known;
      for (const auto& f : roles_) known += (known.empty() ? "" : ", ") + f.role;
      throw InputError("role '" + message.role + "' has no entry in the chat template (it has: " + known +
                       "); add " + message.role + "=PREFIX{content}SUFFIX or *=... to data.chat_template");
    }
    const std::string prefix = replace_all(format->prefix, "{role}", message.role);
    const std::string suffix = replace_all(format->suffix, "{role}", message.role);
    const std::string content = trim_content_ ? trim(message.content) : message.content;
    const bool trained = message.role == kAssistant;
    add(prefix, false);
    add(content, trained);
    // The end-of-turn marker is trained, so the model learns to stop; the whitespace after it
    // only separates turns.
    const size_t last = suffix.find_last_not_of(kWhitespace);
    const size_t marker_end = last == std::string::npos ? 0 : last + 1;
    add(suffix.substr(0, marker_end), trained);
    add(suffix.substr(marker_end), false);
  }
  return segments;
}

std::string ChatTemplate::generation_prompt(const std::vector<ChatMessage>& messages) const {
  std::string text;
  for (const auto& segment : render(messages)) text += segment.text;
  if (const RoleFormat* format = format_for(kAssistant)) text += replace_all(format->prefix, "{role}", kAssistant);
  return text;
}

std::string ChatTemplate::end_of_turn() const {
  const RoleFormat* format = format_for(kAssistant);
  if (!format) return {};
  const std::string suffix = replace_all(format->suffix, "{role}", kAssistant);
  const size_t last = suffix.find_last_not_of(kWhitespace);
  return last == std::string::npos ? std::string() : suffix.substr(0, last + 1);
}

std::optional<std::string> check_chat_template(const std::string& spec) {
  try {
    ChatTemplate::parse(spec);
  } catch (const InputError& e) {
    return std::string(e.what());
  }
  return std::nullopt;
}

}  // namespace xtrain::text
