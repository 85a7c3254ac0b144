// A rank that ended badly, and the report about it, laid out like torchelastic's
// ChildFailedError summary (time, host, rank, exit code or signal, error file, message), so
// that people and tools used to torchrun's output read it the same way.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "launch/error_file.h"

namespace xtrain::launch {

struct RankFailure {
  int rank = 0;
  int local_rank = 0;
  int node_rank = 0;
  std::string host;
  int pid = 0;
  int exit_code = 0;  // the exit status when the rank exited
  int signal = 0;     // the signal number when a signal killed it (exit_code is then unused)
  int64_t time = 0;   // unix seconds: the error file's timestamp, else when the launcher saw it end
  std::string error_file;
  std::optional<ErrorRecord> error;  // what the rank wrote to error_file, if anything
  // The whole node was lost (its launcher stopped beating): rank is the node's first rank, and
  // error's message says how long it was silent.
  bool node_lost = false;
};

// The failure of the rank whose raw waitpid status is wait_status; reads error_file.
RankFailure observe_failure(int rank, int local_rank, int node_rank, int pid, int wait_status,
                            const std::string& error_file);

// "SIGKILL", or "signal 42" for a number without a name.
std::string signal_name(int signal);

// One line: "rank 1 (local_rank 1 on host) exited with code 3: <message>" or "... was killed
// by SIGKILL", or for a lost node "node 1 (host) was lost: <message>".
std::string describe(const RankFailure& failure);

// The multi-line report. title names the failed command; others are further ranks that
// failed on their own in the same attempt.
std::string failure_report(const std::string& title, const RankFailure& root_cause,
                           const std::vector<RankFailure>& others);

// JSON text, to pass a failure between the nodes' launchers.
std::string to_json_text(const RankFailure& failure);
RankFailure failure_from_json_text(const std::string& text);

}  // namespace xtrain::launch
