// `xtrain export`: turns a training checkpoint of any layout (single-process or sharded) into a
// consolidated Hugging Face folder: model.safetensors with the full tensors, and config.json.
#pragma once
#include <string>

namespace xtrain::ckpt {

// Writes out_dir (created if needed; its model.safetensors and config.json are replaced
// durably). Returns the number of tensors written.
int64_t export_hf_folder(const std::string& checkpoint_dir, const std::string& out_dir);

}  // namespace xtrain::ckpt
