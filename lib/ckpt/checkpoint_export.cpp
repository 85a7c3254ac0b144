#include "ckpt/checkpoint_export.h"

#include <filesystem>

#include "ckpt/checkpoint_reader.h"
#include "ckpt/hf_config.h"
#include "ckpt/safetensors.h"
#include "util/durable_file.h"

namespace xtrain::ckpt {

int64_t export_hf_folder(const std::string& checkpoint_dir, const std::string& out_dir,
                         const std::vector<ExtraFile>& extra_files) {
  CheckpointReader checkpoint(checkpoint_dir);
  TensorMap tensors;
  for (const auto& name : checkpoint.names()) tensors[name] = checkpoint.read_full("model", name);
  std::filesystem::create_directories(out_dir);
  save_safetensors(out_dir + "/model.safetensors", tensors, {{"format", "pt"}});
  util::write_file_durable(out_dir + "/config.json", checkpoint.model_config.dump(2) + "\n");
  const auto eos = checkpoint.model_config.find("eos_token_id");
  if (eos != checkpoint.model_config.end() && eos->is_number_integer())
    util::write_file_durable(out_dir + "/generation_config.json",
                             hf_generation_config(eos->get<int64_t>()).dump(2) + "\n");
  for (const auto& file : extra_files) util::write_file_durable(out_dir + "/" + file.name, util::read_file(file.source));
  return static_cast<int64_t>(tensors.size());
}

}  // namespace xtrain::ckpt
