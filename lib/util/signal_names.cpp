#include "util/signal_names.h"

#include <csignal>
#include <sstream>

#include <fmt/format.h>

namespace xtrain::util {
namespace {

struct NamedSignal {
  const char* name;
  int number;
};

// SIGKILL and SIGSTOP cannot be caught; the others terminate a process by default and are what
// schedulers send (SLURM: TERM, and USR1 with --signal; Kubernetes: TERM; a terminal: INT, HUP).
constexpr NamedSignal kSignals[] = {{"TERM", SIGTERM}, {"INT", SIGINT}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2},
                                    {"HUP", SIGHUP}};

std::optional<int> number_of(std::string name) {
  if (name.rfind("SIG", 0) == 0) name = name.substr(3);
  for (const auto& signal : kSignals)
    if (name == signal.name) return signal.number;
  return std::nullopt;
}

std::vector<std::string> split_names(const std::string& names) {
  std::vector<std::string> parts;
  std::stringstream stream(names);
  for (std::string part; std::getline(stream, part, ',');) {
    const auto first = part.find_first_not_of(" \t"), last = part.find_last_not_of(" \t");
    if (first != std::string::npos) parts.push_back(part.substr(first, last - first + 1));
  }
  return parts;
}

}  // namespace

std::optional<std::string> check_signal_list(const std::string& names) {
  for (const auto& name : split_names(names))
    if (!number_of(name))
      return fmt::format("unknown signal '{}'; expected a comma-separated list of TERM, INT, USR1, USR2, HUP", name);
  return std::nullopt;
}

std::vector<int> parse_signal_list(const std::string& names) {
  std::vector<int> numbers;
  for (const auto& name : split_names(names))
    if (auto number = number_of(name)) numbers.push_back(*number);
  return numbers;
}

std::string signal_name(int signal_number) {
  for (const auto& signal : kSignals)
    if (signal.number == signal_number) return std::string("SIG") + signal.name;
  return fmt::format("signal {}", signal_number);
}

}  // namespace xtrain::util
