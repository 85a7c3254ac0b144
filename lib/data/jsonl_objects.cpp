#include "data/jsonl_objects.h"

#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/input_error.h"

namespace xtrain::data {

void for_each_jsonl_object(const std::string& path, const std::string& kind, const std::string& format,
                           const JsonlVisitor& visit) {
  std::ifstream in(path);
  if (!in) throw InputError(fmt::format("{}: cannot read the {}", path, kind));
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const auto where = fmt::format("{}:{}", path, number);
    nlohmann::json record;
    try {
      record = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& error) {
      throw InputError(fmt::format("{}: invalid JSON at column {}: {}", where, error.byte, format));
    }
    if (!record.is_object()) throw InputError(fmt::format("{}: not a JSON object: {}", where, format));
    visit(record, where, number);
  }
}

}  // namespace xtrain::data
