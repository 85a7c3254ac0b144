// xtrain command line: parses arguments and runs the chosen subcommand (commands.h). Exit codes:
// 0 success, 2 bad input (recipe, arguments, files), 1 runtime failure.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <string>

#include <CLI/CLI.hpp>
#include <c10/util/Logging.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include "commands.h"
#include "host_allocator.h"
#include "launch/error_file.h"
#include "launch/launcher.h"
#include "parallel/comm.h"
#include "util/exit_codes.h"
#include "device/host_tensor_memory.h"
#include "util/input_error.h"

namespace {

using namespace xtrain;

// A collective that failed or timed out ends the process at once, reported like any error:
// unwinding would wait on process groups whose peer is gone.
void end_on_collective_failure() {
  parallel::set_collective_failure_handler([](const std::string& message) {
    fmt::print(stderr, "error: {}\n", message);
    launch::record_error_if_requested(launch::error_record("CommError", message));
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(kExitRuntimeFailure);
  });
}

// c10 attaches a C++ stack trace to its errors, and c10d quotes them in its warnings (a store
// whose host died: dozens of lines per call). They mean nothing to a user; as in PyTorch,
// TORCH_SHOW_CPP_STACKTRACES=1 keeps them.
void hide_cpp_stack_traces() {
  const char* show = std::getenv("TORCH_SHOW_CPP_STACKTRACES");
  if (show != nullptr && std::string(show) == "1") return;
  c10::SetStackTraceFetcher([]() -> std::string { return ""; });
}

// `xtrain launch [options] -- command...`: what follows the first `--` is the ranks' command
// line, kept away from CLI11 so that its options are not taken for launch's. Returns the number
// of arguments left for CLI11.
int split_launch_command(int argc, char** argv, launch::LaunchOptions& options) {
  if (argc < 2 || std::string(argv[1]) != "launch") return argc;
  for (int i = 2; i < argc; ++i)
    if (std::string(argv[i]) == "--") {
      options.command.assign(argv + i + 1, argv + argc);
      options.command_given = true;
      return i;
    }
  return argc;
}

// Runs the chosen command; an error ends it with its exit code and its message on stderr (and
// in torchelastic's error file under a launcher, whose failure report shows it).
int run_reporting_errors(const std::function<int()>& run) {
  try {
    return run();
  } catch (const InputError& e) {
    std::fflush(stdout);  // what the run printed comes before why it ended
    fmt::print(stderr, "{}\n", e.what());
    launch::record_error_if_requested(launch::error_record(e));
    return kExitBadInput;
  } catch (const c10::Error& e) {
    // LibTorch's own errors carry a C++ stack trace that means nothing to a user.
    std::fflush(stdout);
    fmt::print(stderr, "error: {}\n", e.what_without_backtrace());
    launch::record_error_if_requested(launch::error_record("Error", e.what_without_backtrace()));
    return kExitRuntimeFailure;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "error: {}\n", e.what());
    launch::record_error_if_requested(launch::error_record(e));
    return kExitRuntimeFailure;
  }
}

int run_main(int argc, char** argv) {
  keep_freed_host_memory();
  util::track_host_tensor_memory(large_host_blocks_from_environment());
  hide_cpp_stack_traces();
  end_on_collective_failure();
  launch::LaunchOptions launch_options;
  const int parsed_argc = split_launch_command(argc, argv, launch_options);

  CLI::App app{"xtrain: train transformer models from YAML recipes"};
  app.require_subcommand(1);
  app.set_version_flag("--version", cli::version_text());
  const auto commands = cli::add_commands(app, launch_options, argv);
  try {
    app.parse(parsed_argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    launch::record_error_if_requested(launch::error_record("ArgumentError", e.what()));
    return kExitBadInput;
  }
  for (const auto& command : commands)
    if (*command.app) return run_reporting_errors(command.run);
  return kExitRuntimeFailure;
}

}  // namespace

// LibTorch's static destructors deregister some ten thousand operators: 0.15 s of every process's
// 0.5 s on a small command, paid again by each rank. Everything the run owns is closed and joined
// when run_main returns, so the process ends there; sanitizer builds exit normally, for LSan.
int main(int argc, char** argv) {
  const int code = run_main(argc, argv);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return code;
#else
  std::fflush(nullptr);
  std::_Exit(code);
#endif
}
