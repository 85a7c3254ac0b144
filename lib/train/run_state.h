// RunState: where a run is (its step and how many samples it has consumed) and everything a
// checkpoint holds to continue it bit-exactly on any layout: this rank's pieces of the weights
// and of AdamW's moments, named by their global tensors (ckpt/piece_layout.h), the RNG states,
// the fp16 loss scale, the experts' router biases and the data schedule (trainer_state.json).
// It saves (one file for a whole model, else a shard per rank of the first replica), loads at
// resume, and rolls back to the newest intact checkpoint after a loss spike.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "ckpt/checkpoint_reader.h"
#include "ckpt/piece_layout.h"
#include "optim/adamw.h"
#include "optim/loss_scaler.h"
#include "parallel/device_mesh.h"
#include "parallel/parallel_model.h"
#include "train/checkpoint_writer.h"
#include "train/expert_balance.h"
#include "train/fault_injection.h"
#include "train/rank_sums.h"

namespace xtrain::train {

// This rank's pieces of the parameters, as the optimizer updates and checkpoints store them.
struct TrainedParameters {
  std::vector<optim::NamedParameter> optimized;  // frozen ones marked by the caller
  std::vector<ckpt::PieceLayout> layouts;        // where each lies in its whole tensor
  std::vector<int64_t> copies;                   // tensor-parallel ranks holding the same piece
  std::vector<bool> primary;                     // false: a copy another rank checkpoints
  std::vector<bool> replica;                     // true: a data-parallel replica's, written by its first rank

  // decays(name, dims): the family's weight-decay rule.
  template <typename Decays>
  static TrainedParameters of(parallel::ParallelModel& model, Decays&& decays) {
    TrainedParameters trained;
    for (const auto* piece : model.parameters()) {
      trained.optimized.push_back({piece->name, piece->local, decays(piece->name, piece->shape.size())});
      trained.layouts.push_back({piece->shape, piece->offsets, piece->sizes, piece->begin, piece->local.numel()});
      trained.copies.push_back(piece->copies);
      trained.primary.push_back(piece->primary);
      trained.replica.push_back(piece->replica);
    }
    return trained;
  }
};

// What trainer_state.json says about the run besides its position.
struct RunIdentity {
  int64_t seq_len = 0;
  parallel::ParallelDegrees degrees;
  bool sequence_parallel = false;
  nlohmann::json data_schedule;  // {global_batch_size, balance_window, pack}
};

// A file that another part of the run adds to a checkpoint (GRPO's kept rollout): whole, the same
// on every rank, written by rank 0.
struct CheckpointAttachment {
  std::string file;
  ckpt::TensorMap tensors;
  ckpt::Metadata metadata;
};

// After a rollback: the checkpoint and the samples skipped, [skipped_from, skipped_to).
struct Rollback {
  std::string dir;
  int64_t skipped_from = 0, skipped_to = 0;
};

// The file of a checkpoint that holds world rank `rank`'s optimizer state of its own, if any.
std::string rank_state_file(int64_t rank);

class RunState {
 public:
  RunState(parallel::ParallelModel& model, TrainedParameters& parameters, optim::AdamW& optimizer,
           optim::DynamicLossScaler* loss_scaler, ExpertBalance& experts, const parallel::DeviceMesh& mesh,
           RankSums& sums, torch::Device device, RunIdentity identity);

  int64_t step = 0;
  int64_t samples_consumed = 0;

  // Weights, optimizer state, position and RNG from a checkpoint; bad contents are InputErrors
  // naming `dir`.
  void load(const ckpt::CheckpointReader& checkpoint, const std::string& dir);
  // The data schedule of the loaded checkpoint's run (null before any load, or if it had none).
  const nlohmann::json& saved_schedule() const { return saved_schedule_; }
  const nlohmann::json& data_schedule() const { return identity_.data_schedule; }

  nlohmann::json trainer_state(int64_t at_step) const;
  // Hands the writer this rank's files for the checkpoint of `at_step`, and the attachments; the
  // weights must be finite.
  void save(int64_t at_step, CheckpointWriter& writer, const ckpt::CheckpointStore& store,
            const nlohmann::json& model_config, const std::string& recipe_yaml, const std::optional<Fault>& fault,
            std::vector<CheckpointAttachment> attachments = {});
  // Back to the newest intact checkpoint, keeping the data position (the samples since that
  // checkpoint are skipped); std::nullopt when there is none.
  std::optional<Rollback> roll_back(const ckpt::CheckpointStore& store, CheckpointWriter& writer);

 private:
  // trainer_state.json's "parallel": the degrees a checkpoint was saved under.
  nlohmann::json layout() const;
  bool saved_on_this_layout(const nlohmann::json& saved_trainer_state) const;
  void check_finite_weights(int64_t at_step, const ckpt::CheckpointStore& store);
  CheckpointWriter::WriteFiles write_whole(CheckpointWriter& writer, const nlohmann::json& model_config,
                                           const nlohmann::json& state, const std::string& recipe_yaml,
                                           const std::optional<Fault>& fault, int64_t at_step);
  CheckpointWriter::WriteFiles write_shard(CheckpointWriter& writer, const nlohmann::json& model_config,
                                           const nlohmann::json& state, const std::string& recipe_yaml,
                                           const std::optional<Fault>& fault, int64_t at_step);

  parallel::ParallelModel& model_;
  TrainedParameters& parameters_;
  optim::AdamW& optimizer_;
  optim::DynamicLossScaler* loss_scaler_;
  ExpertBalance& experts_;
  const parallel::DeviceMesh& mesh_;
  RankSums& sums_;
  torch::Device device_;
  RunIdentity identity_;
  nlohmann::json saved_schedule_;
};

}  // namespace xtrain::train
