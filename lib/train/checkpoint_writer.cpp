#include "train/checkpoint_writer.h"

#include <chrono>

#include <fmt/format.h>
#include <torch/torch.h>

namespace xtrain::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

}  // namespace

CheckpointWriter::CheckpointWriter(const ckpt::CheckpointStore& store, parallel::Comm& world, torch::Device device,
                                   bool background, OnCommit on_commit, CopyCommitted copy_committed)
    : store_(store),
      world_(world),
      device_(device),
      background_(background),
      on_commit_(std::move(on_commit)),
      copy_committed_(std::move(copy_committed)) {}

CheckpointWriter::~CheckpointWriter() {
  // Unwinding from an error: the write in flight may finish, but it is not committed.
  if (thread_.joinable()) thread_.join();
}

void CheckpointWriter::save(int64_t step, WriteFiles write, double snapshot_s) {
  finish();
  const auto started = Clock::now();
  save_started_ = started;
  if (world_.rank() == 0) store_.prepare_temp_folder(step);
  world_.barrier();
  const std::string folder = store_.temp_folder(step);
  step_ = step;
  in_flight_ = true;
  error_.clear();
  written_ = false;
  auto run = [this, folder, write = std::move(write)] {
    const auto write_started = Clock::now();
    try {
      write(folder);
    } catch (const std::exception& e) {
      error_ = e.what();
    }
    write_s_ = seconds_since(write_started);
    written_ = true;
  };
  if (!background_) {
    run();
    commit_when_written(/*wait=*/true);
    return;
  }
  blocking_s_ = snapshot_s + seconds_since(started);
  thread_ = std::thread(std::move(run));
}

void CheckpointWriter::poll() {
  if (in_flight_) commit_when_written(/*wait=*/false);
}

void CheckpointWriter::finish() {
  if (in_flight_) commit_when_written(/*wait=*/true);
}

void CheckpointWriter::commit_when_written(bool wait) {
  const auto started = Clock::now();
  if (wait && thread_.joinable()) thread_.join();
  // One all-reduce: how many ranks have written their files, and how many of them failed.
  auto flags = torch::tensor({written_ ? 1.0 : 0.0, written_ && !error_.empty() ? 1.0 : 0.0}, torch::kFloat64);
  flags = flags.to(device_);
  world_.all_reduce_sum(flags).wait();
  flags = flags.to(torch::kCPU);
  if (flags[0].item<double>() < static_cast<double>(world_.size())) return;  // at a later step, then
  if (thread_.joinable()) thread_.join();
  in_flight_ = false;
  if (flags[1].item<double>() > 0) {
    if (!error_.empty()) store_.abandon(step_, std::runtime_error(error_));
    throw std::runtime_error(fmt::format("checkpoint step-{}: another rank could not write its files; see its "
                                         "error. The checkpoints written before it are intact",
                                         step_));
  }
  const std::string committed = world_.rank() == 0 ? store_.commit(step_) : store_.step_folder(step_);
  double copy_s = 0;
  if (copy_committed_) {
    world_.barrier();  // the folder is in place for every rank
    copy_s = copy_committed_(step_, committed);
  }
  if (world_.rank() != 0) return;
  // Synchronous: the whole save held the step up. In the background: the snapshot, and whatever
  // this wait for the write took.
  const double blocking_s =
      background_ ? blocking_s_ + (wait ? seconds_since(started) : copy_s) : seconds_since(save_started_);
  on_commit_(step_, committed, blocking_s, write_s_, copy_s);
}

}  // namespace xtrain::train
