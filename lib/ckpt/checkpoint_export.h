// `xtrain export`: turns a training checkpoint of any layout (single-process or sharded) into a
// consolidated Hugging Face folder: model.safetensors with the full tensors, config.json,
// generation_config.json, and the tokenizer's files, so that transformers' Auto classes load it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace xtrain::ckpt {

// A file copied into the folder: from source, under name.
struct ExtraFile {
  std::string source;
  std::string name;
};

// A LoRA run's checkpoint (ckpt/lora_export.h): merged into the base weights (the default), or,
// with adapter_only, PEFT's adapter_config.json and adapter_model.safetensors instead of the
// weights, naming base_model as base_model_name_or_path. adapter_only on a checkpoint without
// adapters is an InputError.
struct AdapterExport {
  bool adapter_only = false;
  std::string base_model;
};

// The size above which the weights are split over several files, as save_pretrained does.
constexpr int64_t kDefaultMaxShardBytes = 5'000'000'000;

// Writes the folder out_dir: the weights in model.safetensors, or, when they exceed
// max_shard_bytes, in model-0000K-of-0000N.safetensors files of at most that size (a larger
// tensor alone in its file) with a model.safetensors.index.json; config.json,
// generation_config.json and extra_files, each JSON file without the keys by which transformers
// would import code (auto_map, custom_pipelines, trust_remote_code); and manifest.json, which
// lets eval, generate and a later init_from verify the folder. Returns the number of tensors.
//
// Export writes only inside out_dir. An InputError (exit 2) names the path and the fix, before
// any work, when out_dir is a symbolic link, not a folder, a folder in which a file export
// writes is a symbolic link, or a non-empty folder and overwrite is false. The files are written
// (created exclusively, never through a link) into a new folder beside out_dir, which a rename
// then puts in its place: out_dir is whole or absent, never half written. With overwrite, into a
// non-empty folder, each file replaces its namesake by a rename instead; the folder's other
// files stay, weight files of the other layout (or shard count) that an earlier export left are
// removed so that no loader picks them, and manifest.json goes first and comes back last.
int64_t export_hf_folder(const std::string& checkpoint_dir, const std::string& out_dir,
                         const std::vector<ExtraFile>& extra_files = {},
                         int64_t max_shard_bytes = kDefaultMaxShardBytes, bool overwrite = false,
                         const AdapterExport& adapter = {});

// "5GB", "200MB", "100KB" or a number of bytes (decimal units, as transformers reads them);
// std::nullopt when the text is none of these.
std::optional<int64_t> parse_shard_size(const std::string& text);

}  // namespace xtrain::ckpt
