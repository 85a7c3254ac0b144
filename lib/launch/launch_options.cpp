#include "launch/launch_options.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <random>
#include <stdexcept>

#include <fmt/format.h>

#include "util/input_error.h"

namespace xtrain::launch {
namespace {

constexpr int kTorchrunDefaultPort = 29500;

bool is_executable_file(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

std::string this_executable() {
  char buffer[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  if (n <= 0) throw std::runtime_error("launch: cannot read /proc/self/exe to re-execute xtrain");
  return std::string(buffer, static_cast<size_t>(n));
}

std::string fresh_run_id() {
  std::random_device entropy;
  return fmt::format("{:08x}{:08x}", entropy(), entropy());
}

}  // namespace

void check_launch_options(const LaunchOptions& o) {
  if (o.nproc_per_node < 1)
    throw InputError(fmt::format("launch: --nproc-per-node must be at least 1, got {}", o.nproc_per_node));
  if (o.nnodes < 1) throw InputError(fmt::format("launch: --nnodes must be at least 1, got {}", o.nnodes));
  if (o.node_rank < 0 || o.node_rank >= o.nnodes)
    throw InputError(
        fmt::format("launch: --node-rank {} is outside 0..{} (--nnodes {})", o.node_rank, o.nnodes - 1, o.nnodes));
  // Several nodes coordinate through a store on master_port + 1, so that port must exist too.
  const int highest_port = o.nnodes > 1 ? 65534 : 65535;
  if (o.master_port < 0 || o.master_port > highest_port)
    throw InputError(fmt::format("launch: --master-port must be in 1..{}, got {}", highest_port, o.master_port));
  if (o.master_addr.empty()) throw InputError("launch: --master-addr is empty; give a host name or address");
  if (o.max_restarts < 0)
    throw InputError(fmt::format("launch: --max-restarts must be 0 or more, got {}", o.max_restarts));
  if (!o.command_given || o.command.empty())
    throw InputError(
        "launch: missing the command after `--`, e.g. `xtrain launch --nproc-per-node 2 -- train recipe.yaml`");
  const int fewest = fewest_nodes(o), working = working_nodes(o);
  if (fewest < 1 || fewest > o.nnodes)
    throw InputError(fmt::format("launch: --nnodes {}:{}: MIN must be in 1..MAX", fewest, o.nnodes));
  if (working < fewest || working > o.nnodes)
    throw InputError(fmt::format("launch: --active-nodes {} must be in {}..{} (--nnodes {}:{}): the nodes beyond it "
                                 "wait as spares",
                                 working, fewest, o.nnodes, fewest, o.nnodes));
  if (!(o.heartbeat_s >= 0.05 && o.heartbeat_s <= 60))
    throw InputError(fmt::format("launch: --heartbeat must be in 0.05..60 seconds, got {}", o.heartbeat_s));
  if (o.join_timeout_s <= 0)
    throw InputError(fmt::format("launch: --join-timeout must be positive, got {}", o.join_timeout_s));
}

void parse_nnodes(const std::string& text, LaunchOptions& options) {
  auto number = [&](const std::string& part) {
    size_t used = 0;
    int value = 0;
    try {
      value = std::stoi(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (part.empty() || used != part.size() || value < 1)
      throw InputError(fmt::format("launch: --nnodes {}: expected N or MIN:MAX (torchrun's form), numbers of at "
                                   "least 1, e.g. --nnodes 2 or --nnodes 2:3",
                                   text));
    return value;
  };
  const size_t colon = text.find(':');
  if (colon == std::string::npos) {
    options.nnodes = number(text);
    options.min_nnodes = 0;
    return;
  }
  options.min_nnodes = number(text.substr(0, colon));
  options.nnodes = number(text.substr(colon + 1));
  if (options.min_nnodes > options.nnodes)
    throw InputError(fmt::format("launch: --nnodes {}: MIN is above MAX; give MIN:MAX, e.g. --nnodes {}:{}", text,
                                 options.nnodes, options.min_nnodes));
}

int fewest_nodes(const LaunchOptions& options) {
  return options.min_nnodes > 0 ? options.min_nnodes : options.nnodes;
}

int working_nodes(const LaunchOptions& options) {
  return options.active_nodes > 0 ? options.active_nodes : options.nnodes;
}

std::string resolve_program(const std::string& program) {
  if (program.find('/') != std::string::npos) {
    if (!is_executable_file(program))
      throw InputError(fmt::format("launch: --program {}: no executable file at this path", program));
    return program;
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t begin = 0;
  while (begin <= dirs.size()) {
    size_t end = dirs.find(':', begin);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = end > begin ? dirs.substr(begin, end - begin) : ".";
    const std::string candidate = dir + "/" + program;
    if (is_executable_file(candidate)) return candidate;
    begin = end + 1;
  }
  throw InputError(
      fmt::format("launch: --program {}: not found on PATH; give the path to an executable file", program));
}

int pick_free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error("launch: cannot create a socket to pick a free port");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  ::close(fd);
  if (!ok) throw std::runtime_error("launch: cannot bind a socket to pick a free port");
  return ntohs(address.sin_port);
}

LaunchOptions resolve_launch_options(LaunchOptions options) {
  check_launch_options(options);
  options.program = options.program.empty() ? this_executable() : resolve_program(options.program);
  if (options.master_port == 0) options.master_port = options.nnodes == 1 ? pick_free_port() : kTorchrunDefaultPort;
  if (options.run_id.empty()) options.run_id = options.nnodes == 1 ? fresh_run_id() : "none";
  return options;
}

}  // namespace xtrain::launch
