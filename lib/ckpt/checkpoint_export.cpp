#include "ckpt/checkpoint_export.h"

#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "ckpt/checkpoint_reader.h"
#include "ckpt/hf_config.h"
#include "ckpt/hf_folder.h"
#include "ckpt/manifest.h"
#include "ckpt/safetensors.h"
#include "model/model_spec.h"
#include "util/durable_file.h"

namespace xtrain::ckpt {

namespace {

namespace fs = std::filesystem;

bool is_weight_shard_name(const std::string& name) {
  return name.size() > 23 && name.rfind("model-", 0) == 0 && name.find("-of-") != std::string::npos &&
         name.compare(name.size() - 12, 12, ".safetensors") == 0;
}

// Removes the weight files of the form this export does not write.
void remove_other_layout(const std::string& out_dir, bool sharded) {
  if (sharded) {
    fs::remove(out_dir + "/model.safetensors");
    return;
  }
  fs::remove(out_dir + "/model.safetensors.index.json");
  for (const auto& entry : fs::directory_iterator(out_dir))
    if (is_weight_shard_name(entry.path().filename().string())) fs::remove(entry.path());
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
  remove_other_layout(out_dir, files.size() > 1);
  if (files.size() == 1) {
    save_safetensors(out_dir + "/model.safetensors", files[0], {{"format", "pt"}});
    return;
  }
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  int64_t total = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string file = fmt::format("model-{:05}-of-{:05}.safetensors", i + 1, files.size());
    save_safetensors(out_dir + "/" + file, files[i], {{"format", "pt"}});
    for (const auto& [name, tensor] : files[i]) {
      weight_map[name] = file;
      total += static_cast<int64_t>(tensor.nbytes());
    }
  }
  const nlohmann::ordered_json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  util::write_file_durable(out_dir + "/model.safetensors.index.json", index.dump(2) + "\n");
}

}  // namespace

int64_t export_hf_folder(const std::string& checkpoint_dir, const std::string& out_dir,
                         const std::vector<ExtraFile>& extra_files, int64_t max_shard_bytes) {
  CheckpointReader checkpoint(checkpoint_dir);
  const auto& spec = model::model_spec_for_hf(checkpoint.model_config, checkpoint_dir + "/config.json");
  TensorMap tensors;
  std::vector<std::string> names;  // as stored in the folder, in the checkpoint's order
  for (const auto& name : checkpoint.names()) {
    tensors[name] = checkpoint.read_full("model", name);
    for (const auto& stored : model::hf_stored_tensors(spec, name, tensors[name].sizes().vec()))
      names.push_back(stored.first);
  }
  const auto stored = hf_tensors(tensors, spec.family);
  fs::create_directories(out_dir);
  fs::remove(out_dir + "/" + kManifestFile);  // until the new one: an export cut short is unverified, not wrong
  write_weights(out_dir, names, stored, max_shard_bytes);
  util::write_file_durable(out_dir + "/config.json", checkpoint.model_config.dump(2) + "\n");
  if (const auto gaps = checkpoint.model_config.find("xtrain_unexported"); gaps != checkpoint.model_config.end())
    fmt::print(stderr,
               "warning: {} computes what transformers' {} does not: {}; the exported folder loads there but "
               "computes without them\n",
               checkpoint_dir, checkpoint.model_config.value("architectures", nlohmann::json::array({"class"}))[0].get<std::string>(),
               fmt::join(gaps->get<std::vector<std::string>>(), ", "));
  if (const auto generation = hf_generation_config(checkpoint.model_config); !generation.is_null())
    util::write_file_durable(out_dir + "/generation_config.json", generation.dump(2) + "\n");
  for (const auto& file : extra_files) util::write_file_durable(out_dir + "/" + file.name, util::read_file(file.source));
  write_manifest(out_dir);
  return static_cast<int64_t>(stored.size());
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
