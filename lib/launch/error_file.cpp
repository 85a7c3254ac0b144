#include "launch/error_file.h"

#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <memory>
#include <typeinfo>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/durable_file.h"

namespace xtrain::launch {
namespace {

std::string demangled_type_name(const std::exception& error) {
  const char* mangled = typeid(error).name();
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
  std::string text = status == 0 && name ? name.get() : mangled;
  const std::string own_namespace = "xtrain::";
  if (text.rfind(own_namespace, 0) == 0) text.erase(0, own_namespace.size());
  return text;
}

int64_t integer_timestamp(const nlohmann::json& value) {
  if (value.is_number_integer()) return value.get<int64_t>();
  if (value.is_string()) return std::strtoll(value.get<std::string>().c_str(), nullptr, 10);
  return 0;
}

}  // namespace

ErrorRecord error_record(const std::string& type_name, const std::string& what) {
  return {type_name + ": " + what, what, static_cast<int64_t>(std::time(nullptr))};
}

ErrorRecord error_record(const std::exception& error) { return error_record(demangled_type_name(error), error.what()); }

std::string error_file_json(const ErrorRecord& record) {
  const nlohmann::json json = {
      {"message",
       {{"message", record.message},
        {"extraInfo", {{"py_callstack", record.callstack}, {"timestamp", std::to_string(record.timestamp)}}}}}};
  return json.dump();
}

void record_error_if_requested(const ErrorRecord& record) {
  const char* path = std::getenv("TORCHELASTIC_ERROR_FILE");
  if (path == nullptr || *path == '\0') return;
  try {
    util::replace_file_atomic(path, error_file_json(record));
  } catch (const std::exception& error) {
    fmt::print(stderr, "warning: cannot write the error file (TORCHELASTIC_ERROR_FILE): {}\n", error.what());
  }
}

std::optional<ErrorRecord> read_error_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  const nlohmann::json json = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object() || !json.contains("message")) return std::nullopt;
  const auto& message = json["message"];
  ErrorRecord record;
  if (message.is_string()) {
    record.message = message.get<std::string>();
    if (json.contains("timestamp")) record.timestamp = integer_timestamp(json["timestamp"]);
    return record;
  }
  if (!message.is_object() || !message.contains("message") || !message["message"].is_string()) return std::nullopt;
  record.message = message["message"].get<std::string>();
  if (message.contains("extraInfo") && message["extraInfo"].is_object()) {
    const auto& extra = message["extraInfo"];
    if (extra.contains("py_callstack") && extra["py_callstack"].is_string())
      record.callstack = extra["py_callstack"].get<std::string>();
    if (extra.contains("timestamp")) record.timestamp = integer_timestamp(extra["timestamp"]);
  }
  return record;
}

}  // namespace xtrain::launch
