// Checkpoints kept in the nodes' host memory as well as on disk (checkpoint.in_memory), so that a
// restart after a lost node reads the checkpoint from the nodes that are left, not from run.dir
// (the in-memory tier of Gemini and of NVIDIA's local checkpoints).
//
// Each node keeps one folder in host memory: a tmpfs ($XTRAIN_NODE_MEMORY_DIR, else
// /dev/shm/xtrain-<hash of run.dir>), which outlives the ranks' processes but not the node.
// Once a checkpoint is committed to disk, every rank copies the files it wrote into its node's
// folder (rank 0 also the metadata and the manifest) and sends them to the same local rank of the
// next node, which keeps them too: after a node's loss every file still has a copy. Each folder
// then drops the older steps. The copy runs in the background, over a group of its own, while
// training goes on; the next save waits for it (wait()). Until it ends, the nodes' memory holds
// the step before, and a restart then reads disk. Ranks are placed on nodes as torchrun places
// them: rank r on node r / ranks_per_node.
//
// On a restart the ranks assemble one step: each node lists what it holds, a node that lacks a
// file (a spare standing in for a lost node) receives it from a node that has it, and every node
// checks its folder against the manifest (checksums, every value finite). Only when every node's
// copy verifies do the ranks resume from memory; otherwise they read run.dir as before.
#pragma once
#include <atomic>
#include <cstdint>
#include <optional>
#include <memory>
#include <string>
#include <thread>

#include <torch/types.h>

#include "parallel/comm.h"

namespace xtrain::train {

// $XTRAIN_NODE_MEMORY_DIR, else /dev/shm/xtrain-<16 hex digits of run_dir's absolute path>.
std::string node_memory_folder(const std::string& run_dir);

class MemoryCheckpoints {
 public:
  // world: every rank of the job, a group that only this object uses (the copies run beside the
  // training's collectives); device: where its collectives run (the parameters' device).
  MemoryCheckpoints(std::string root, std::shared_ptr<parallel::Comm> world, int64_t ranks_per_node,
                    torch::Device device);
  ~MemoryCheckpoints();
  MemoryCheckpoints(const MemoryCheckpoints&) = delete;
  MemoryCheckpoints& operator=(const MemoryCheckpoints&) = delete;

  const std::string& root() const { return root_; }
  int64_t nodes() const { return nodes_; }

  // Collective, once step-<step> is committed at `folder`: starts its copy in the background
  // (after waiting for the one before). A failure to write a copy is a warning: disk has the step.
  void keep(int64_t step, const std::string& folder);
  // Waits for the copy in flight; its seconds, or those of the last one (0 before any).
  double wait();
  // The seconds of the last copy that ended (0 before any), without waiting.
  double last_copy_seconds() const { return copy_seconds_; }

  struct Assembled {
    std::string dir;             // this node's folder holding the step
    int64_t files_fetched = 0;   // over every node
    int64_t bytes_fetched = 0;
    std::string verification;    // this node's manifest check
    double seconds = 0;
  };
  // Collective. The step assembled and verified on every node, or nullopt (each node that
  // failed says why on stderr) when some node's copy is missing a file or does not verify.
  std::optional<Assembled> assemble(int64_t step);

  // Collective, at the end of a run: every node's folder removed.
  void remove();

 private:
  std::string step_folder(int64_t step) const;
  bool node_leader() const { return rank_ % ranks_per_node_ == 0; }

  void copy(int64_t step, const std::string& folder);

  std::string root_;
  std::shared_ptr<parallel::Comm> group_;
  parallel::Comm& world_;
  std::thread copying_;
  std::atomic<double> copy_seconds_{0};
  int64_t rank_, size_, ranks_per_node_, nodes_;
  torch::Device device_;
};

}  // namespace xtrain::train
