// Training checkpoints: <run.dir>/checkpoints/step-<N>/ holding
//   model.safetensors + config.json   a Hugging Face folder of the family (loadable by HF as is)
//   optimizer.safetensors             optimizer state
//   trainer_state.json                step, data position, RNG state, ...
//   recipe.yaml                       the resolved recipe the run used
// A checkpoint is written into a hidden temp folder, every file and the folder fsynced, then
// renamed into place; `checkpoints/latest` (a symlink) is re-pointed last, atomically. A kill
// at any instant leaves `latest` naming a complete checkpoint. manifest.json (ckpt/manifest.h),
// written last before the rename, holds every file's checksums: readers verify it, and a
// damaged `latest` gives way to the newest checkpoint that verifies. Older ones beyond `keep`
// are removed after `latest` moves; the one just committed, verified as it was written, never
// is. A failed write removes its temp folder and leaves every earlier checkpoint as it was.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ckpt/manifest.h"
#include "ckpt/safetensors.h"

namespace xtrain::ckpt {

struct CheckpointContents {
  TensorMap model;
  nlohmann::json model_config;  // HF config.json
  TensorMap optimizer;
  nlohmann::json trainer_state;
  std::string recipe_yaml;
};

class CheckpointStore {
 public:
  CheckpointStore(std::string run_dir, int64_t keep);

  std::string dir() const { return dir_; }
  // Writes step-<step> durably and moves `latest` to it. Returns the checkpoint folder.
  std::string save(int64_t step, const CheckpointContents& contents) const;
  // A writer that fills the folder itself (each rank of a distributed run writes its shard):
  // prepare_temp_folder() creates the empty folder the step is written into, its path the same
  // in every process of the job; commit() turns it into step-<step> as save() does.
  std::string prepare_temp_folder(int64_t step) const;
  std::string temp_folder(int64_t step) const;
  std::string commit(int64_t step) const;
  // Where step-<step> is once committed.
  std::string step_folder(int64_t step) const;
  // A shard write failed: removes the temp folder and throws the runtime error that names it.
  [[noreturn]] void abandon(int64_t step, const std::exception& error) const;
  // The folder `latest` points at, if any.
  std::optional<std::string> latest() const;
  // The checkpoint to continue from: `latest` if it verifies (verify_resumable: checksums and
  // finite values), else the newest step-<N> that does, with what was skipped and why.
  // std::nullopt when there is no checkpoint at all. An InputError when there are checkpoints but
  // none verifies, or (strict) when `latest` fails.
  struct Choice {
    std::string dir;
    ManifestCheck check;
    std::vector<std::string> skipped;  // "<folder>: <problems>"
  };
  std::optional<Choice> newest_intact(bool strict) const;
  // Removes temp folders left by a writer that was killed mid-save.
  void remove_stale_temp_folders() const;

 private:
  void prune() const;
  std::vector<std::string> candidates() const;  // latest first, then step-<N> newest first
  std::string commit_folder(int64_t step, const std::string& temp_dir) const;

  std::string dir_;
  int64_t keep_;
};

// N of a checkpoint folder named step-<N> (a name, not a path); nullopt for any other name.
std::optional<int64_t> step_of(const std::string& folder_name);

struct LoadedCheckpoint {
  std::string dir;
  TensorMap model;
  TensorMap optimizer;
  nlohmann::json trainer_state;
  std::string recipe_yaml;
};

// config.json, trainer_state.json and recipe.yaml, each fsynced.
void write_metadata_files(const std::string& folder, const nlohmann::json& model_config,
                          const nlohmann::json& trainer_state, const std::string& recipe_yaml);

// Reads every file of a checkpoint folder; a missing or corrupt file is an InputError that
// names it.
LoadedCheckpoint load_checkpoint(const std::string& dir);

// Verifies a folder that a user named (resume, eval, generate, export): a failed manifest is an
// InputError listing the damaged files and tensors; a plain Hugging Face folder without one
// passes (no_manifest); a training checkpoint without one is damaged (manifest.h).
ManifestCheck verify_checkpoint(const std::string& dir);

// What a checkpoint to continue training from must pass: verify_manifest, then every value of
// its weights and optimizer state finite (finite_check.h). Never throws for damage: a failed
// check lists the problems.
ManifestCheck check_resumable(const std::string& dir);
// check_resumable for a folder the user named (checkpoint.resume: DIR): an InputError naming
// what was checked and what failed.
ManifestCheck verify_resumable(const std::string& dir);

// "the checksums of every file against manifest.json, and every weight and optimizer value
// finite": what check_resumable checks, for messages.
extern const char* const kResumableChecks;

}  // namespace xtrain::ckpt
