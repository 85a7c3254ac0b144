#include "ckpt/checkpoint.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

#include <fmt/format.h>

#include "ckpt/finite_check.h"
#include "util/durable_file.h"
#include "util/input_error.h"

namespace fs = std::filesystem;

namespace xtrain::ckpt {

namespace {

constexpr const char* kStepPrefix = "step-";
constexpr const char* kTempPrefix = ".tmp-step-";

std::string free_space(const std::string& path) {
  struct statvfs disk {};
  for (fs::path at = path; !at.empty(); at = at.parent_path()) {
    if (::statvfs(at.c_str(), &disk) == 0)
      return fmt::format("{:.1f} MiB free", static_cast<double>(disk.f_bavail) * disk.f_frsize / (1 << 20));
    if (at == at.parent_path()) break;
  }
  return "free space unknown";
}

// A write that failed (disk full, read-only or missing folder) leaves no partial folder behind.
[[noreturn]] void write_failed(int64_t step, const std::string& temp_dir, const std::exception& error) {
  std::error_code ignored;
  fs::remove_all(temp_dir, ignored);
  throw std::runtime_error(fmt::format(
      "checkpoint step-{} could not be written: {}; its temp folder was removed, leaving {} at {}; the "
      "checkpoints written before it are intact",
      step, error.what(), free_space(temp_dir), fs::path(temp_dir).parent_path().string()));
}

}  // namespace

std::optional<int64_t> step_of(const std::string& folder_name) {
  if (folder_name.rfind(kStepPrefix, 0) != 0) return std::nullopt;
  const std::string digits = folder_name.substr(std::string(kStepPrefix).size());
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), ::isdigit)) return std::nullopt;
  return std::stoll(digits);
}

CheckpointStore::CheckpointStore(std::string run_dir, int64_t keep)
    : dir_(std::move(run_dir) + "/checkpoints"), keep_(keep) {}

std::string CheckpointStore::save(int64_t step, const CheckpointContents& contents) const {
  const std::string temp_dir = fmt::format("{}/{}{}-{}", dir_, kTempPrefix, step, ::getpid());
  try {
    fs::create_directories(dir_);
    fs::remove_all(temp_dir);
    fs::create_directories(temp_dir);
    save_safetensors(temp_dir + "/model.safetensors", contents.model, {{"format", "pt"}});
    save_safetensors(temp_dir + "/optimizer.safetensors", contents.optimizer);
    write_metadata_files(temp_dir, contents.model_config, contents.trainer_state, contents.recipe_yaml);
  } catch (const std::exception& e) {
    write_failed(step, temp_dir, e);
  }
  return commit_folder(step, temp_dir);
}

std::string CheckpointStore::temp_folder(int64_t step) const {
  return fmt::format("{}/{}{}-job", dir_, kTempPrefix, step);
}

std::string CheckpointStore::prepare_temp_folder(int64_t step) const {
  const std::string temp_dir = temp_folder(step);
  try {
    fs::remove_all(temp_dir);
    fs::create_directories(temp_dir);
  } catch (const std::exception& e) {
    write_failed(step, temp_dir, e);
  }
  return temp_dir;
}

void CheckpointStore::abandon(int64_t step, const std::exception& error) const {
  write_failed(step, temp_folder(step), error);
}

std::string CheckpointStore::commit(int64_t step) const { return commit_folder(step, temp_folder(step)); }

std::string CheckpointStore::step_folder(int64_t step) const { return fmt::format("{}/{}{}", dir_, kStepPrefix, step); }

std::string CheckpointStore::commit_folder(int64_t step, const std::string& temp_dir) const {
  const std::string final_dir = step_folder(step);
  const std::string name = fs::path(final_dir).filename().string();
  try {
    write_manifest(temp_dir);
    util::fsync_path(temp_dir);
  } catch (const std::exception& e) {
    write_failed(step, temp_dir, e);
  }
  // Re-saving a step (a rerun of --stop-at-step) replaces the old folder.
  if (fs::exists(final_dir)) {
    if (latest() == final_dir) fs::remove(dir_ + "/latest");
    fs::remove_all(final_dir);
  }
  fs::rename(temp_dir, final_dir);
  util::fsync_path(dir_);
  util::replace_symlink_atomic(name, dir_ + "/latest");
  prune();
  return final_dir;
}

std::optional<std::string> CheckpointStore::latest() const {
  const std::string link = dir_ + "/latest";
  std::error_code error;
  if (!fs::is_symlink(link, error)) return std::nullopt;
  auto target = fs::read_symlink(link, error);
  if (error) return std::nullopt;
  return dir_ + "/" + target.string();
}

std::vector<std::string> CheckpointStore::candidates() const {
  std::vector<std::string> folders;
  std::error_code error;
  if (fs::is_symlink(dir_ + "/latest", error)) {
    auto target = fs::read_symlink(dir_ + "/latest", error);
    folders.push_back(error ? dir_ + "/latest" : dir_ + "/" + target.string());
  }
  std::vector<std::pair<int64_t, std::string>> steps;
  if (fs::is_directory(dir_, error))
    for (const auto& entry : fs::directory_iterator(dir_, error))
      if (auto step = step_of(entry.path().filename().string())) steps.emplace_back(*step, entry.path().string());
  std::sort(steps.rbegin(), steps.rend());
  for (const auto& [step, folder] : steps)
    if (std::find(folders.begin(), folders.end(), folder) == folders.end()) folders.push_back(folder);
  return folders;
}

std::optional<CheckpointStore::Choice> CheckpointStore::newest_intact(bool strict) const {
  const auto folders = candidates();
  if (folders.empty()) return std::nullopt;
  Choice choice;
  for (const auto& folder : folders) {
    ManifestCheck check = check_resumable(folder);
    if (check.usable()) {
      choice.dir = folder;
      choice.check = std::move(check);
      return choice;
    }
    if (strict)
      throw InputError(fmt::format("{} failed verification ({}): {}; checkpoint.resume is strict, so the run "
                                   "stops: set checkpoint.resume: auto to continue from the newest intact checkpoint",
                                   folder, kResumableChecks, check.summary()));
    choice.skipped.push_back(fmt::format("{}: {}", folder, check.summary()));
  }
  throw InputError(fmt::format("no intact checkpoint in {}: {}; set checkpoint.resume: never to start over", dir_,
                               fmt::join(choice.skipped, " | ")));
}

void CheckpointStore::remove_stale_temp_folders() const {
  if (!fs::is_directory(dir_)) return;
  for (const auto& entry : fs::directory_iterator(dir_))
    if (entry.path().filename().string().rfind(kTempPrefix, 0) == 0) fs::remove_all(entry.path());
}

void CheckpointStore::prune() const {
  std::vector<std::pair<int64_t, fs::path>> checkpoints;
  for (const auto& entry : fs::directory_iterator(dir_))
    if (auto step = step_of(entry.path().filename().string()); step && entry.is_directory())
      checkpoints.emplace_back(*step, entry.path());
  std::sort(checkpoints.begin(), checkpoints.end());
  const auto current = latest();
  const int64_t excess = static_cast<int64_t>(checkpoints.size()) - keep_;
  for (int64_t i = 0; i < excess; ++i)
    if (checkpoints[i].second.string() != current) fs::remove_all(checkpoints[i].second);
}

void write_metadata_files(const std::string& folder, const nlohmann::json& model_config,
                          const nlohmann::json& trainer_state, const std::string& recipe_yaml) {
  util::write_file_durable(folder + "/config.json", model_config.dump(2) + "\n");
  util::write_file_durable(folder + "/trainer_state.json", trainer_state.dump(2) + "\n");
  util::write_file_durable(folder + "/recipe.yaml", recipe_yaml);
}

ManifestCheck verify_checkpoint(const std::string& dir) {
  std::error_code error;
  if (!fs::is_directory(dir, error)) throw InputError(fmt::format("{}: no such checkpoint folder", dir));
  ManifestCheck check = verify_manifest(dir);
  if (!check.usable())
    throw InputError(fmt::format("{} failed verification (the checksums of every file against manifest.json): {}; "
                                 "the checkpoint is damaged: use an earlier one",
                                 dir, check.summary()));
  return check;
}

const char* const kResumableChecks =
    "the checksums of every file against manifest.json, and every weight and optimizer value finite";

ManifestCheck check_resumable(const std::string& dir) {
  ManifestCheck check = verify_manifest(dir);
  if (!check.usable()) return check;
  const auto started = std::chrono::steady_clock::now();
  try {
    check.problems = non_finite_tensors(dir);
  } catch (const InputError& e) {
    check.problems = {e.what()};
  }
  check.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  check.finite_checked = check.problems.empty();
  if (!check.finite_checked) check.status = ManifestCheck::Status::failed;
  return check;
}

ManifestCheck verify_resumable(const std::string& dir) {
  std::error_code error;
  if (!fs::is_directory(dir, error)) throw InputError(fmt::format("{}: no such checkpoint folder", dir));
  ManifestCheck check = check_resumable(dir);
  if (!check.usable())
    throw InputError(fmt::format("{} failed verification ({}): {}; the checkpoint is damaged: use an earlier one",
                                 dir, kResumableChecks, check.summary()));
  return check;
}

LoadedCheckpoint load_checkpoint(const std::string& dir) {
  if (!fs::is_directory(dir)) throw InputError(fmt::format("checkpoint folder not found: {}", dir));
  LoadedCheckpoint loaded;
  loaded.dir = dir;
  loaded.model = load_safetensors(dir + "/model.safetensors").tensors;
  loaded.optimizer = load_safetensors(dir + "/optimizer.safetensors").tensors;
  const std::string state_path = dir + "/trainer_state.json";
  try {
    loaded.trainer_state = nlohmann::json::parse(util::read_file(state_path));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: invalid JSON: {}", state_path, e.what()));
  }
  loaded.recipe_yaml = util::read_file(dir + "/recipe.yaml");
  return loaded;
}

}  // namespace xtrain::ckpt
