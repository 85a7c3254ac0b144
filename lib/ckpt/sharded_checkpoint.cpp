#include "ckpt/sharded_checkpoint.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "ckpt/safetensors.h"

namespace xtrain::ckpt {

std::string shard_file_name(int64_t rank) { return fmt::format("shard-{:05d}.safetensors", rank); }

void write_checkpoint_shard(const std::string& dir, int64_t rank, const std::vector<ParameterPiece>& pieces,
                            int64_t optimizer_step) {
  TensorMap tensors;
  Metadata metadata{{"format", "xtrain-shard"}, {"optimizer_step", std::to_string(optimizer_step)}};
  for (const auto& piece : pieces) {
    if (piece.model.numel() == 0) continue;  // this rank holds none of it
    tensors["model/" + piece.name] = piece.model;
    tensors["exp_avg/" + piece.name] = piece.exp_avg;
    tensors["exp_avg_sq/" + piece.name] = piece.exp_avg_sq;
    const auto& at = piece.layout;
    metadata[piece.name] =
        nlohmann::json{{"shape", at.shape}, {"offsets", at.offsets}, {"sizes", at.sizes}, {"begin", at.begin}}.dump();
  }
  save_safetensors(dir + "/" + shard_file_name(rank), tensors, metadata);
}

}  // namespace xtrain::ckpt
