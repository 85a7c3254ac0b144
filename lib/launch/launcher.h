// `xtrain launch`, a torchrun-compatible launcher: starts this node's ranks with torchrun's
// environment, copies their output with a "[rank R]: " prefix, forwards SIGINT/SIGTERM to
// them, stops every rank when one fails (SIGTERM, then SIGKILL after a grace period),
// restarts the whole group up to --max-restarts times, and reports the first failure in
// torchelastic's layout, with the message from the rank's error file. With several nodes the
// launchers agree through one store (see agent_store.h), so they restart or give up together.
#pragma once
#include "launch/agent_store.h"
#include "launch/launch_options.h"

namespace xtrain::launch {

// Returns the exit code: 0 when every rank of every node succeeded, 1 when the job failed,
// 128 + N when signal N stopped it. Throws InputError for inconsistent options. With several
// nodes the launchers meet in the store connect_tcp connects to (parallel/tcp_agent_store.h).
int run_launch(const LaunchOptions& options, const AgentStoreConnector& connect_tcp);

}  // namespace xtrain::launch
