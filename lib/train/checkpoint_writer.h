// Saving checkpoints at step boundaries, synchronously or in the background (checkpoint.async,
// as XTuner's async save and torchtitan's async DCP do). Every rank hands save() a function that
// writes its files into the step's temp folder and fsyncs them. Synchronously it runs at once; in
// the background the caller has already copied the state to host memory (the only cost on the
// step's critical path) and a thread runs it while training goes on. The folder is committed
// (manifest, rename, `latest`) by rank 0 once every rank's write is done: synchronously at once,
// in the background at the first step boundary that finds all writes done (an all-reduce of one
// flag per rank while a save is in flight). A crash during a write therefore leaves `latest` on
// the previous checkpoint, and a failed write on any rank ends the run with that rank's error.
// One save at a time: a save, finish() or the destructor wait for the one in flight. A second
// copy (the nodes' host memory, train/memory_checkpoints.h) is made by every rank once the commit
// is seen by all, at the same boundary.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "ckpt/checkpoint.h"
#include "parallel/comm.h"

namespace xtrain::train {

class CheckpointWriter {
 public:
  using WriteFiles = std::function<void(const std::string& folder)>;
  // Called on rank 0 when a checkpoint is committed: its folder, the seconds the steps were held
  // up by it (the snapshot, or the whole save when synchronous) and the seconds its write took.
  // copy_s: what the second copy took (0 without one).
  using OnCommit =
      std::function<void(int64_t step, const std::string& folder, double blocking_s, double write_s, double copy_s)>;
  // Collective, on every rank, given the committed folder: makes the second copy, returns its seconds.
  using CopyCommitted = std::function<double(int64_t step, const std::string& folder)>;

  // device: where the world comm reduces (the parameters' device).
  CheckpointWriter(const ckpt::CheckpointStore& store, parallel::Comm& world, torch::Device device, bool background,
                   OnCommit on_commit, CopyCommitted copy_committed = nullptr);
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  bool background() const { return background_; }
  // snapshot_s: what the caller spent copying the state, counted as blocking.
  void save(int64_t step, WriteFiles write, double snapshot_s);
  // At a step boundary: commits the save in flight if every rank has written its files.
  void poll();
  // Waits for the save in flight and commits it.
  void finish();

 private:
  void commit_when_written(bool wait);

  const ckpt::CheckpointStore& store_;
  parallel::Comm& world_;
  torch::Device device_;
  bool background_;
  OnCommit on_commit_;
  CopyCommitted copy_committed_;
  std::thread thread_;
  bool in_flight_ = false;
  int64_t step_ = 0;
  double blocking_s_ = 0, write_s_ = 0;
  std::chrono::steady_clock::time_point save_started_;
  std::string error_;  // the background write's, read after join
  std::atomic<bool> written_{false};
};

}  // namespace xtrain::train
