// A JSONL file of JSON objects, one a line, for the readers whose records have fields of their
// own (prompt_dataset.h, preference_dataset.h): each non-blank line is parsed and handed to
// `visit` with its place ("PATH:LINE") and line number (1 for the first). Blank lines (spaces,
// tabs, a carriage return) are skipped. Problems are InputErrors:
//   "PATH: cannot read the <kind>"                    the file does not open
//   "PATH:LINE: invalid JSON at column N: <format>"   N the parser's byte position
//   "PATH:LINE: not a JSON object: <format>"
// where `kind` names the file ("prompt file") and `format` says what a line should hold.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace xtrain::data {

using JsonlVisitor = std::function<void(const nlohmann::json& record, const std::string& where, int64_t line)>;

void for_each_jsonl_object(const std::string& path, const std::string& kind, const std::string& format,
                           const JsonlVisitor& visit);

}  // namespace xtrain::data
