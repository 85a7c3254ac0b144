// The subcommands of xtrain. Each one declares its arguments on the command line app and, once
// the line is parsed, runs with them: run() returns the exit code and throws InputError for bad
// input, which main reports (exit 2).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "launch/launcher.h"

namespace xtrain::cli {

struct Command {
  CLI::App* app;             // the subcommand, owned by the root app; chosen when *app is true
  std::function<int()> run;
};

// "xtrain VERSION (runtime; build type)", for --version and `xtrain env`.
std::string version_text();

// Declares every subcommand on app. launch_options receives `xtrain launch`'s options (its
// command, after `--`, is split off before parsing); argv is the process's own, for the
// commands that may re-execute it.
std::vector<Command> add_commands(CLI::App& app, launch::LaunchOptions& launch_options, char** argv);

}  // namespace xtrain::cli
