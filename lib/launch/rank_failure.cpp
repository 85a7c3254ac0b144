#include "launch/rank_failure.h"

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <ctime>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace xtrain::launch {
namespace {

const char* const kRule = "============================================================";
const char* const kThinRule = "------------------------------------------------------------";

std::string host_name() {
  char buffer[256] = {};
  if (::gethostname(buffer, sizeof(buffer) - 1) != 0) return "unknown";
  return buffer;
}

std::string local_time_text(int64_t unix_seconds) {
  const std::time_t time = static_cast<std::time_t>(unix_seconds);
  std::tm parts{};
  localtime_r(&time, &parts);
  char buffer[64];
  std::strftime(buffer, sizeof(buffer), "%Y-%m-%d_%H:%M:%S", &parts);
  return buffer;
}

// Continuation lines of a field line up under its first line.
std::string indented(const std::string& text, size_t indent) {
  std::string out;
  const std::string pad(indent, ' ');
  for (char c : text) {
    out += c;
    if (c == '\n') out += pad;
  }
  while (!out.empty() && (out.back() == ' ' || out.back() == '\n')) out.pop_back();
  return out;
}

std::string failure_block(const RankFailure& f) {
  constexpr size_t kFieldIndent = 14;  // "  error_file: "
  std::string out = fmt::format("[{}]:\n", f.rank);
  out += fmt::format("  time      : {}\n", local_time_text(f.time));
  out += fmt::format("  host      : {}\n", f.host);
  out += fmt::format("  rank      : {} (local_rank: {})\n", f.rank, f.local_rank);
  // torchelastic writes a signal as a negative exit code, as Python's subprocess does.
  out += fmt::format("  exitcode  : {} (pid: {})\n", f.signal ? -f.signal : f.exit_code, f.pid);
  if (f.signal) out += fmt::format("  signal    : {}\n", signal_name(f.signal));
  out += fmt::format("  error_file: {}\n", f.error ? f.error_file : "<N/A>");
  if (f.error) {
    out += fmt::format("  message   : {}\n", indented(f.error->message, kFieldIndent));
    const bool callstack_adds =
        !f.error->callstack.empty() && f.error->message.find(f.error->callstack) == std::string::npos;
    if (callstack_adds) out += fmt::format("  traceback : {}\n", indented(f.error->callstack, kFieldIndent));
  } else if (f.signal) {
    out += fmt::format("  traceback : Signal {} ({}) received by PID {}\n", f.signal, signal_name(f.signal), f.pid);
  } else {
    out += "  traceback : <N/A> (the rank wrote no error file)\n";
  }
  return out;
}

}  // namespace

std::string signal_name(int signal) {
  switch (signal) {
    case SIGHUP:
      return "SIGHUP";
    case SIGINT:
      return "SIGINT";
    case SIGQUIT:
      return "SIGQUIT";
    case SIGILL:
      return "SIGILL";
    case SIGTRAP:
      return "SIGTRAP";
    case SIGABRT:
      return "SIGABRT";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGKILL:
      return "SIGKILL";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGSEGV:
      return "SIGSEGV";
    case SIGUSR2:
      return "SIGUSR2";
    case SIGPIPE:
      return "SIGPIPE";
    case SIGALRM:
      return "SIGALRM";
    case SIGTERM:
      return "SIGTERM";
    case SIGXCPU:
      return "SIGXCPU";
    case SIGXFSZ:
      return "SIGXFSZ";
    case SIGSYS:
      return "SIGSYS";
    default:
      return fmt::format("signal {}", signal);
  }
}

RankFailure observe_failure(int rank, int local_rank, int node_rank, int pid, int wait_status,
                            const std::string& error_file) {
  RankFailure f;
  f.rank = rank;
  f.local_rank = local_rank;
  f.node_rank = node_rank;
  f.host = host_name();
  f.pid = pid;
  if (WIFSIGNALED(wait_status))
    f.signal = WTERMSIG(wait_status);
  else
    f.exit_code = WEXITSTATUS(wait_status);
  f.error_file = error_file;
  f.error = read_error_file(error_file);
  f.time = f.error && f.error->timestamp > 0 ? f.error->timestamp : static_cast<int64_t>(std::time(nullptr));
  return f;
}

std::string describe(const RankFailure& f) {
  if (f.node_lost)
    return fmt::format("node {} ({}) was lost: {}", f.node_rank, f.host, f.error ? f.error->message : "no heartbeat");
  std::string what =
      f.signal ? "was killed by " + signal_name(f.signal) : fmt::format("exited with code {}", f.exit_code);
  std::string line = fmt::format("rank {} (local_rank {} on {}) {}", f.rank, f.local_rank, f.host, what);
  if (f.error) line += ": " + f.error->message.substr(0, f.error->message.find('\n'));
  return line;
}

std::string failure_report(const std::string& title, const RankFailure& root_cause,
                           const std::vector<RankFailure>& others) {
  std::string out = fmt::format("{}\n{} FAILED\n{}\nFailures:\n", kRule, title, kThinRule);
  if (others.empty()) out += "  <NO_OTHER_FAILURES>\n";
  for (const auto& other : others) out += failure_block(other);
  out += fmt::format("{}\nRoot Cause (first observed failure):\n", kThinRule);
  out += failure_block(root_cause);
  out += fmt::format("{}\n", kRule);
  return out;
}

std::string to_json_text(const RankFailure& f) {
  nlohmann::json json = {{"rank", f.rank},
                         {"local_rank", f.local_rank},
                         {"node_rank", f.node_rank},
                         {"host", f.host},
                         {"pid", f.pid},
                         {"exit_code", f.exit_code},
                         {"signal", f.signal},
                         {"time", f.time},
                         {"error_file", f.error_file},
                         {"node_lost", f.node_lost}};
  if (f.error)
    json["error"] = {
        {"message", f.error->message}, {"callstack", f.error->callstack}, {"timestamp", f.error->timestamp}};
  return json.dump();
}

RankFailure failure_from_json_text(const std::string& text) {
  const auto json = nlohmann::json::parse(text);
  RankFailure f;
  f.rank = json.at("rank");
  f.local_rank = json.at("local_rank");
  f.node_rank = json.at("node_rank");
  f.host = json.at("host");
  f.pid = json.at("pid");
  f.exit_code = json.at("exit_code");
  f.signal = json.at("signal");
  f.time = json.at("time");
  f.error_file = json.at("error_file");
  f.node_lost = json.value("node_lost", false);
  if (json.contains("error")) {
    const auto& e = json["error"];
    f.error = ErrorRecord{e.at("message"), e.at("callstack"), e.at("timestamp")};
  }
  return f;
}

}  // namespace xtrain::launch
