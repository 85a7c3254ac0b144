// What `xtrain launch` is asked to do: how many ranks this node starts, the node's place in
// the job, the restart policy, and the command every rank runs. The defaults follow torchrun.
#pragma once
#include <string>
#include <vector>

namespace xtrain::launch {

struct LaunchOptions {
  int nproc_per_node = 0;
  int nnodes = 1;      // the most nodes of the job (MAX of --nnodes MIN:MAX); node ranks are 0..nnodes-1
  int min_nnodes = 0;  // 0: nnodes (a plain --nnodes N); the fewest nodes an attempt may run on
  int active_nodes = 0;  // 0: nnodes; the nodes that run ranks at once, the others wait as hot spares
  double heartbeat_s = 0.5;  // launchers beat through their store; 3 missed beats lose a node
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: a free port when nnodes == 1 (torchrun --standalone), else 29500
  int max_restarts = 0;
  std::string run_id;   // empty: a fresh id when nnodes == 1, else "none" (nodes must agree)
  std::string log_dir;  // empty: no log files; error files go to a temporary folder
  std::string program;  // empty: this executable (the command is an xtrain subcommand)
  std::vector<std::string> command;
  bool command_given = false;  // the `--` separator was present
  // Before SIGKILL: a forwarded stop signal gives the ranks time to write a checkpoint; after a
  // failure the survivors cannot finish a synchronous step without the failed rank, so a
  // short wait (to flush output) suffices and the restart comes sooner.
  double stop_grace_s = 30;
  double failure_grace_s = 3;
  double join_timeout_s = 600;
};

// Throws InputError naming the option and the fix when the options are inconsistent.
void check_launch_options(const LaunchOptions& options);

// Reads --nnodes as torchrun spells it: "N" or "MIN:MAX" into options.min_nnodes and
// options.nnodes. Throws InputError naming the text and the expected form.
void parse_nnodes(const std::string& text, LaunchOptions& options);

// MIN of --nnodes (N for a plain N): an attempt runs on no fewer nodes. And the nodes an attempt
// runs ranks on when that many are there (--active-nodes, else MAX); the rest are spares.
int fewest_nodes(const LaunchOptions& options);
int working_nodes(const LaunchOptions& options);

// The options with every default filled in: the program as an absolute path (InputError when
// it cannot be found or run), the master port, the run id.
LaunchOptions resolve_launch_options(LaunchOptions options);

// The executable path, as execve needs it: a name without '/' is searched on PATH.
// Throws InputError when no executable file is found.
std::string resolve_program(const std::string& program);

// A TCP port that was free a moment ago (bound to port 0 on all interfaces, then released).
int pick_free_port();

}  // namespace xtrain::launch
