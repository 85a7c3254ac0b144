// `xtrain export`: turns a training checkpoint of any layout (single-process or sharded) into a
// consolidated Hugging Face folder: model.safetensors with the full tensors, config.json,
// generation_config.json, and the tokenizer's files, so that transformers' Auto classes load it.
#pragma once
#include <string>
#include <vector>

namespace xtrain::ckpt {

// A file copied into the folder: from source, under name.
struct ExtraFile {
  std::string source;
  std::string name;
};

// Writes out_dir (created if needed; the files it writes replace earlier ones durably).
// Returns the number of tensors written.
int64_t export_hf_folder(const std::string& checkpoint_dir, const std::string& out_dir,
                         const std::vector<ExtraFile>& extra_files = {});

}  // namespace xtrain::ckpt
