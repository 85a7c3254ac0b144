#include "data/sources/jsonl_record.h"

#include <nlohmann/json.hpp>

#include "util/input_error.h"

namespace xtrain::data {
namespace {

// "[json.exception.parse_error.101] parse error at line 1, column 7: syntax error ..." ->
// "invalid JSON at column 7: syntax error ...": the line number is ours, not the parser's.
std::string describe(const nlohmann::json::parse_error& error) {
  const std::string what = error.what();
  const size_t detail = what.find(": ");
  return "invalid JSON at column " + std::to_string(error.byte) +
         (detail == std::string::npos ? "" : what.substr(detail));
}

std::string string_field(const nlohmann::json& object, const char* name, const std::string& problem) {
  const auto field = object.find(name);
  if (field == object.end() || !field->is_string()) throw InputError(problem);
  return field->get<std::string>();
}

std::vector<text::ChatMessage> parse_messages(const nlohmann::json& messages, const std::string& where) {
  if (!messages.is_array() || messages.empty())
    throw InputError(where + "\"messages\" must be a non-empty list of {\"role\": ..., \"content\": ...}");
  std::vector<text::ChatMessage> parsed;
  parsed.reserve(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string at = where + "message " + std::to_string(i + 1) + ": ";
    if (!messages[i].is_object()) throw InputError(at + "expected an object {\"role\": ..., \"content\": ...}");
    parsed.push_back({string_field(messages[i], "role", at + "missing string field \"role\""),
                      string_field(messages[i], "content", at + "missing string field \"content\"")});
  }
  return parsed;
}

std::vector<std::string> parse_images(const nlohmann::json& record, const std::string& where) {
  const auto images = record.find("images");
  if (images == record.end()) return {};
  const std::string problem = where + "\"images\" must be a list of image paths (strings)";
  if (!images->is_array()) throw InputError(problem);
  std::vector<std::string> paths;
  for (const auto& image : *images) {
    if (!image.is_string() || image.get<std::string>().empty()) throw InputError(problem);
    paths.push_back(image.get<std::string>());
  }
  return paths;
}

}  // namespace

std::optional<Document> parse_jsonl_record(std::string_view line, const std::string& where_line,
                                           RecordForm expected) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  // Blank lines (a trailing newline, spacing between records) are harmless.
  if (line.find_first_not_of(" \t") == std::string_view::npos) return std::nullopt;
  const std::string where = where_line + ": ";
  nlohmann::json record;
  try {
    record = nlohmann::json::parse(line.begin(), line.end());
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(where + describe(e));
  } catch (const nlohmann::json::exception& e) {  // a number out of range: 1e400
    throw InputError(where + "invalid JSON: " + e.what());
  }
  Document document;
  const bool conversation = record.is_object() && record.contains("messages") && !record.contains("text");
  if (expected == RecordForm::Conversation || (expected == RecordForm::Any && conversation)) {
    const auto messages = record.is_object() ? record.find("messages") : record.end();
    if (messages == record.end()) throw InputError(where + "missing field \"messages\" (a conversation record)");
    document.messages = parse_messages(*messages, where);
    document.images = parse_images(record, where);
    document.is_conversation = true;
    return document;
  }
  std::string problem = "missing string field \"text\"";
  if (expected == RecordForm::Any)
    problem += " (or a \"messages\" list for a conversation)";
  else if (record.is_object() && record.contains("messages"))
    problem += " (this record is a conversation: read the file as chat data)";
  if (!record.is_object()) throw InputError(where + problem);
  document.text = string_field(record, "text", where + problem);
  return document;
}

}  // namespace xtrain::data
