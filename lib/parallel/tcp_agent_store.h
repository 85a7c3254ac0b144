// The launchers' store for a job of several nodes (launch/agent_store.h), on c10d's TCPStore:
// node 0's launcher hosts it on MASTER_PORT + 1 and the others connect to it. It lives beside
// the process groups, which use LibTorch's distributed library too, so that lib/launch stays
// free of LibTorch; `xtrain launch` hands it to run_launch.
#pragma once
#include <memory>

#include "launch/agent_store.h"
#include "launch/launch_options.h"

namespace xtrain::parallel {

// A launch::AgentStoreConnector: see its contract in launch/agent_store.h.
std::unique_ptr<launch::AgentStore> connect_tcp_agent_store(const launch::LaunchOptions& options);

}  // namespace xtrain::parallel
