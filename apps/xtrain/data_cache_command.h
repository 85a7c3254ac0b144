// `xtrain data cache ls | verify | gc`: the entries of a data.cache_dir folder
// (data/token_cache.h), whether each is intact (verify reads and digests every file; exit code 1
// when one is damaged), and removing entries least recently used first down to a size.
#pragma once
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.h"

namespace xtrain::cli {

// Declares `cache` and its subcommands under the `data` command.
std::vector<Command> add_data_cache(CLI::App& data);

}  // namespace xtrain::cli
