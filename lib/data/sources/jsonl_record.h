// One line of a JSONL data file as a Document. Two record forms:
//   {"text": "..."}                                              a plain text document
//   {"messages": [{"role": "user", "content": "..."}, ...]}     a conversation
//   {"messages": [...], "images": ["a.png", ...]}                 an image chat: one image per
//                                                                 "<image>" in the contents
// Other fields are ignored. Problems are InputErrors prefixed with `where` ("file:line: ").
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "data/sources/document.h"

namespace xtrain::data {

enum class RecordForm { Any, Text, Conversation };

// nullopt for a blank line. expected restricts the accepted form.
std::optional<Document> parse_jsonl_record(std::string_view line, const std::string& where,
                                           RecordForm expected = RecordForm::Any);

}  // namespace xtrain::data
