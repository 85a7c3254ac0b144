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

// The size above which the weights are split over several files, as save_pretrained does.
constexpr int64_t kDefaultMaxShardBytes = 5'000'000'000;

// Writes out_dir (created if needed; the files it writes replace earlier ones durably): the
// weights in model.safetensors, or, when they exceed max_shard_bytes, in
// model-0000K-of-0000N.safetensors files of at most that size (a larger tensor alone in its
// file) with a model.safetensors.index.json. Weight files of the other form left by an earlier
// export are removed, so that no loader picks them. manifest.json, written last, lets eval,
// generate and a later init_from verify the folder. Returns the number of tensors written.
int64_t export_hf_folder(const std::string& checkpoint_dir, const std::string& out_dir,
                         const std::vector<ExtraFile>& extra_files = {},
                         int64_t max_shard_bytes = kDefaultMaxShardBytes);

// "5GB", "200MB", "100KB" or a number of bytes (decimal units, as transformers reads them);
// std::nullopt when the text is none of these.
std::optional<int64_t> parse_shard_size(const std::string& text);

}  // namespace xtrain::ckpt
