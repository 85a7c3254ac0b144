// torchelastic's error file. A rank that fails writes
//   {"message": {"message": "<Type>: <what>",
//                "extraInfo": {"py_callstack": "<trace>", "timestamp": "<unix seconds>"}}}
// to $TORCHELASTIC_ERROR_FILE; the launcher (xtrain's or torchrun) reads it back into its
// failure report. The layout is torch.distributed.elastic's, so either side may be torchrun.
#pragma once
#include <cstdint>
#include <exception>
#include <optional>
#include <string>

namespace xtrain::launch {

struct ErrorRecord {
  std::string message;    // "<Type>: <what>"
  std::string callstack;  // C++ has no Python traceback: the what() text
  int64_t timestamp = 0;  // unix seconds
};

// The record for an exception caught now: its demangled type (without "xtrain::") and what().
ErrorRecord error_record(const std::exception& error);
ErrorRecord error_record(const std::string& type_name, const std::string& what);

std::string error_file_json(const ErrorRecord& record);

// Writes the record to $TORCHELASTIC_ERROR_FILE when that is set (to a temporary file renamed
// over it, so a reader never sees half a file; an existing file is replaced, as torchelastic
// does). Never throws: a failure to write is a warning on stderr.
void record_error_if_requested(const ErrorRecord& record);

// The record in an error file; nullopt when the file is missing or not torchelastic's layout.
// Also reads the older layout {"message": "<text>", "timestamp": ...}.
std::optional<ErrorRecord> read_error_file(const std::string& path);

}  // namespace xtrain::launch
