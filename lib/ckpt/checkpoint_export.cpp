#include "ckpt/checkpoint_export.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "ckpt/checkpoint_reader.h"
#include "model/spec/hf_config.h"
#include "ckpt/hf_folder.h"
#include "ckpt/lora_export.h"
#include "ckpt/manifest.h"
#include "ckpt/safetensors.h"
#include "model/spec/model_spec.h"
#include "util/durable_file.h"
#include "util/input_error.h"
#include "util/posix_file.h"

namespace xtrain::ckpt {

namespace {

namespace fs = std::filesystem;

bool is_weight_shard_name(const std::string& name) {
  return name.size() > 23 && name.rfind("model-", 0) == 0 && name.find("-of-") != std::string::npos &&
         name.compare(name.size() - 12, 12, ".safetensors") == 0;
}

// Every name an export may write or remove in its target (shards match is_weight_shard_name).
bool is_export_file(const std::string& name, const std::set<std::string>& extra_names) {
  static const std::set<std::string> kFixed = {"model.safetensors", "model.safetensors.index.json", "config.json",
                                               "generation_config.json", kManifestFile,
                                               "adapter_config.json", "adapter_model.safetensors"};
  return kFixed.count(name) > 0 || extra_names.count(name) > 0 || is_weight_shard_name(name);
}

// The keys by which transformers imports code from a folder (trust_remote_code): a folder that
// xtrain exports computes what xtrain trained, and must never point a loader at other code.
const std::set<std::string> kCodeReferenceKeys = {"auto_map", "custom_pipelines", "trust_remote_code"};

// Removes the code-reference keys at any depth (sub-configs carry auto_map too); returns those removed.
template <class Json>
std::set<std::string> strip_code_references(Json& json) {
  std::set<std::string> removed;
  if (json.is_array())
    for (auto& item : json) removed.merge(strip_code_references(item));
  if (!json.is_object()) return removed;
  for (const auto& key : kCodeReferenceKeys)
    if (json.erase(key) > 0) removed.insert(key);
  for (auto& item : json) removed.merge(strip_code_references(item));
  return removed;
}

void note_stripped(const std::string& name, const std::set<std::string>& removed) {
  if (!removed.empty())
    fmt::print(stderr, "note: {}: dropped {} (references to code outside the folder; it loads without "
                       "trust_remote_code)\n", name, fmt::join(removed, ", "));
}

// The JSON text of a file to export, without code references; other files as they are. Files
// that name no such key are copied byte for byte (re-serialising would reformat them).
std::string exported_contents(const std::string& source, const std::string& name) {
  std::string contents = util::read_file(source);
  if (name.size() < 5 || name.compare(name.size() - 5, 5, ".json") != 0) return contents;
  bool mentions = false;
  for (const auto& key : kCodeReferenceKeys) mentions = mentions || contents.find('"' + key + '"') != std::string::npos;
  if (!mentions) return contents;
  nlohmann::ordered_json json;
  try {
    json = nlohmann::ordered_json::parse(contents);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: not valid JSON ({}); export drops its code references (auto_map) and must "
                                 "read it: fix the file",
                                 source, e.what()));
  }
  const auto removed = strip_code_references(json);
  note_stripped(name, removed);
  return removed.empty() ? contents : json.dump(2) + "\n";
}

std::string readlink_text(const std::string& path) {
  std::error_code error;
  const auto target = fs::read_symlink(path, error);
  return error ? "?" : target.string();
}

// Refuses, before any work, a target export could not write safely: a symbolic link (the export
// would land wherever it points), a file, a folder whose files export writes include links, or
// a non-empty folder without overwrite. Returns whether the target holds anything.
bool check_target(const std::string& target, const std::set<std::string>& extra_names, bool overwrite) {
  struct stat info {};
  if (::lstat(target.c_str(), &info) != 0) {
    if (errno == ENOENT) return false;
    util::throw_errno("inspect", target);
  }
  if (S_ISLNK(info.st_mode))
    throw InputError(fmt::format("export target {} is a symbolic link (to {}); export writes only into a real "
                                 "folder: give the folder itself (or a new path), not a link to it",
                                 target, readlink_text(target)));
  if (!S_ISDIR(info.st_mode))
    throw InputError(fmt::format("export target {} exists and is not a folder; give a new or empty folder", target));
  std::vector<std::string> entries;
  for (const auto& entry : fs::directory_iterator(target)) {
    const std::string name = entry.path().filename().string();
    entries.push_back(name);
    if (entry.is_symlink() && is_export_file(name, extra_names))
      throw InputError(fmt::format("{}/{} is a symbolic link (to {}); export writes {} itself and never through a "
                                   "link: remove the link (or choose another folder) and export again",
                                   target, name, readlink_text(entry.path().string()), name));
  }
  if (!entries.empty() && !overwrite)
    throw InputError(fmt::format("export target {} is not empty ({} {}, e.g. {}); pass --overwrite to "
                                 "replace the files export writes there (the others stay), or give a new or empty "
                                 "folder",
                                 target, entries.size(), entries.size() == 1 ? "entry" : "entries",
                                 *std::min_element(entries.begin(), entries.end())));
  return !entries.empty();
}

// A new folder beside the target, on its file system, so that renames out of it are atomic.
// Folders an interrupted export left there are removed first.
std::string make_stage_folder(const std::string& target) {
  const fs::path path(target);
  const fs::path parent = path.has_parent_path() ? path.parent_path() : fs::path(".");
  fs::create_directories(parent);
  const std::string prefix = "." + path.filename().string() + ".export-";
  for (const auto& entry : fs::directory_iterator(parent))
    if (entry.path().filename().string().rfind(prefix, 0) == 0 && !entry.is_symlink() && entry.is_directory())
      fs::remove_all(entry.path());
  const std::string stage = (parent / (prefix + std::to_string(::getpid()))).string();
  if (::mkdir(stage.c_str(), 0777) != 0) util::throw_errno("create the folder", stage);
  return stage;
}

// Consecutive tensors, in the checkpoint's order, grouped into files of at most max_bytes.
std::vector<TensorMap> group_into_files(const std::vector<std::string>& names, const TensorMap& tensors,
                                        int64_t max_bytes) {
  std::vector<TensorMap> files(1);
  int64_t bytes = 0;
  for (const auto& name : names) {
    const auto& tensor = tensors.at(name);
    const int64_t size = static_cast<int64_t>(tensor.nbytes());
    if (!files.back().empty() && bytes + size > max_bytes) {
      files.emplace_back();
      bytes = 0;
    }
    files.back()[name] = tensor;
    bytes += size;
  }
  return files;
}

void write_weights(const std::string& out_dir, const std::vector<std::string>& names, const TensorMap& tensors,
                   int64_t max_shard_bytes) {
  const auto files = group_into_files(names, tensors, max_shard_bytes);
  if (files.size() == 1) {
    save_safetensors(out_dir + "/model.safetensors", files[0], {{"format", "pt"}}, util::FileMode::create_new);
    return;
  }
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  int64_t total = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string file = fmt::format("model-{:05}-of-{:05}.safetensors", i + 1, files.size());
    save_safetensors(out_dir + "/" + file, files[i], {{"format", "pt"}}, util::FileMode::create_new);
    for (const auto& [name, tensor] : files[i]) {
      weight_map[name] = file;
      total += static_cast<int64_t>(tensor.nbytes());
    }
  }
  const nlohmann::ordered_json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  util::write_file_durable(out_dir + "/model.safetensors.index.json", index.dump(2) + "\n", util::FileMode::create_new);
}

void rename_or_throw(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) util::throw_errno("rename " + from + " to", to);
}

// Moves the staged files into a target that holds other files: each rename replaces one file
// (or a link in its place, never what it points to) atomically. The old manifest goes first and
// the new one comes last, so an export cut short leaves an unverified folder, not a wrong one;
// weight files of an earlier export that this one did not write go too, so no loader picks them.
void merge_into(const std::string& stage, const std::string& target, const std::set<std::string>& extra_names) {
  if (::unlink((target + "/" + kManifestFile).c_str()) != 0 && errno != ENOENT)
    util::throw_errno("remove", target + "/" + kManifestFile);
  std::set<std::string> staged;
  for (const auto& entry : fs::directory_iterator(stage)) staged.insert(entry.path().filename().string());
  for (const auto& entry : fs::directory_iterator(target)) {
    const std::string name = entry.path().filename().string();
    const bool weights =
        name == "model.safetensors" || name == "model.safetensors.index.json" || is_weight_shard_name(name);
    if (weights && is_export_file(name, extra_names) && staged.count(name) == 0) fs::remove(entry.path());
  }
  for (const auto& name : staged)
    if (name != kManifestFile) rename_or_throw(stage + "/" + name, target + "/" + name);
  rename_or_throw(stage + "/" + kManifestFile, target + "/" + kManifestFile);
  util::fsync_path(target);
  fs::remove(stage);
}

// The buffers the family's folders store that the trainer state keeps (the expert bias, by its
// tensor name), appended to the tensors and names to write.
void add_stored_buffers(const model::ModelSpec& spec, const nlohmann::json& trainer_state, TensorMap& stored,
                        std::vector<std::string>& names) {
  if (!spec.hf_buffer || !trainer_state.contains("expert_bias")) return;
  for (const auto& [name, values] : trainer_state.at("expert_bias").items()) {
    if (!spec.hf_buffer(name)) continue;
    stored[spec.to_hf_name(name)] = torch::tensor(values.get<std::vector<float>>(), torch::kFloat32);
    names.push_back(spec.to_hf_name(name));
  }
}

// Writes the folder's files into stage: nothing is there yet, so each is created exclusively.
// The adapters alone, as PEFT saves them (ckpt/lora_export.h), with the extra files.
int64_t write_adapter_folder(const CheckpointReader& checkpoint, const model::LoraConfig& lora, const TensorMap& tensors,
                             const std::string& stage, const std::vector<ExtraFile>& extra_files,
                             const std::string& base_model) {
  const auto& spec = model::model_spec_for_hf(checkpoint.model_config, checkpoint.dir() + "/config.json");
  const auto adapters = peft_adapter_tensors(tensors, spec);
  save_safetensors(stage + "/adapter_model.safetensors", adapters, {{"format", "pt"}}, util::FileMode::create_new);
  util::write_file_durable(stage + "/adapter_config.json", peft_adapter_config(lora, base_model).dump(2) + "\n",
                           util::FileMode::create_new);
  for (const auto& file : extra_files)
    util::write_file_durable(stage + "/" + file.name, exported_contents(file.source, file.name),
                             util::FileMode::create_new);
  write_manifest(stage);
  util::fsync_path(stage);
  return static_cast<int64_t>(adapters.size());
}

int64_t write_folder(const std::string& checkpoint_dir, const std::string& stage,
                     const std::vector<ExtraFile>& extra_files, int64_t max_shard_bytes, const AdapterExport& adapter) {
  CheckpointReader checkpoint(checkpoint_dir);
  const auto& spec = model::model_spec_for_hf(checkpoint.model_config, checkpoint_dir + "/config.json");
  const auto lora = model::lora_from_config(checkpoint.model_config, checkpoint_dir + "/config.json");
  if (adapter.adapter_only && !lora)
    throw InputError(fmt::format("--adapter: {} holds no LoRA adapters (its run set no model.lora.targets); export "
                                 "it without --adapter",
                                 checkpoint_dir));
  TensorMap tensors;
  for (const auto& name : checkpoint.names()) tensors[name] = checkpoint.read_full("model", name);
  if (adapter.adapter_only) return write_adapter_folder(checkpoint, *lora, tensors, stage, extra_files, adapter.base_model);
  if (lora) {
    const int64_t merged = merge_lora(tensors, *lora);
    fmt::print(stderr, "note: merged the LoRA adapters of {} layers into their weights (W + {} B A); --adapter "
                       "exports the adapters alone\n",
               merged, lora->scale());
  }
  std::vector<std::string> names;  // as stored in the folder, in the checkpoint's order
  for (const auto& name : checkpoint.names()) {
    if (tensors.count(name) == 0) continue;  // a merged adapter
    for (const auto& stored : model::hf_stored_tensors(spec, name, tensors[name].sizes().vec()))
      names.push_back(stored.first);
  }
  auto stored = hf_tensors(tensors, spec.family);
  add_stored_buffers(spec, checkpoint.trainer_state, stored, names);
  if (spec.hf_copies)
    for (const auto& [name, source] :
         spec.hf_copies(model_config_from_hf(checkpoint.model_config, checkpoint_dir + "/config.json"))) {
      stored[name] = tensors.at(source);
      names.push_back(name);
    }
  write_weights(stage, names, stored, max_shard_bytes);
  nlohmann::json config = checkpoint.model_config;
  config.erase(model::kLoraConfigKey);  // merged: a plain model
  note_stripped("config.json", strip_code_references(config));
  if (const auto gaps = config.find("xtrain_unexported"); gaps != config.end())
    fmt::print(stderr,
               "warning: {} computes what transformers' {} does not: {}; the exported folder loads there but "
               "computes without them\n",
               checkpoint_dir, config.value("architectures", nlohmann::json::array({"class"}))[0].get<std::string>(),
               fmt::join(gaps->get<std::vector<std::string>>(), ", "));
  // name -> contents; a file given in extra_files replaces the one derived here.
  std::map<std::string, std::string> files = {{"config.json", config.dump(2) + "\n"}};
  if (nlohmann::json generation = hf_generation_config(checkpoint.model_config); !generation.is_null()) {
    note_stripped("generation_config.json", strip_code_references(generation));
    files["generation_config.json"] = generation.dump(2) + "\n";
  }
  for (const auto& file : extra_files) files[file.name] = exported_contents(file.source, file.name);
  for (const auto& [name, contents] : files)
    util::write_file_durable(stage + "/" + name, contents, util::FileMode::create_new);
  write_manifest(stage);
  util::fsync_path(stage);
  return static_cast<int64_t>(stored.size());
}

}  // namespace

int64_t export_hf_folder(const std::string& checkpoint_dir, const std::string& out_dir,
                         const std::vector<ExtraFile>& extra_files, int64_t max_shard_bytes, bool overwrite,
                         const AdapterExport& adapter) {
  // "out/" names what the link "out" points to; the target is the entry itself.
  std::string target = out_dir;
  while (target.size() > 1 && target.back() == '/') target.pop_back();
  std::set<std::string> extra_names;
  for (const auto& file : extra_files) extra_names.insert(file.name);
  const bool occupied = check_target(target, extra_names, overwrite);
  const std::string stage = make_stage_folder(target);
  try {
    const int64_t tensors = write_folder(checkpoint_dir, stage, extra_files, max_shard_bytes, adapter);
    if (occupied) {
      merge_into(stage, target, extra_names);
    } else {
      // Replaces nothing, or an empty folder, in one step: the target is whole or absent.
      rename_or_throw(stage, target);
      const fs::path parent = fs::path(target).parent_path();
      util::fsync_path(parent.empty() ? "." : parent.string());
    }
    return tensors;
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(stage, ignored);  // best effort: the error that brought us here is the one to report
    throw;
  }
}

std::optional<int64_t> parse_shard_size(const std::string& text) {
  static const std::pair<const char*, int64_t> kUnits[] = {{"GB", 1'000'000'000}, {"MB", 1'000'000}, {"KB", 1'000}};
  int64_t unit = 1;
  std::string digits = text;
  for (const auto& [suffix, size] : kUnits) {
    const std::string s = suffix;
    if (text.size() > s.size() && text.compare(text.size() - s.size(), s.size(), s) == 0) {
      unit = size;
      digits = text.substr(0, text.size() - s.size());
    }
  }
  if (digits.empty() || digits.size() > 12 || digits.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  const int64_t value = std::stoll(digits) * unit;
  if (value <= 0) return std::nullopt;
  return value;
}

}  // namespace xtrain::ckpt
