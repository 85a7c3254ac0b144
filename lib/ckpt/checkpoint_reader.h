// Reads a training checkpoint of either layout, for any reader layout:
//   single-process: model.safetensors (HF names) + optimizer.safetensors ("exp_avg.<name>",
//     "exp_avg_sq.<name>", "step");
//   sharded (a distributed run): shard-<rank>.safetensors files, each holding pieces of the
//     parameters ("model/<name>", "exp_avg/<name>", "exp_avg_sq/<name>") with their place in the
//     whole tensor in the metadata (see sharded_checkpoint.h and piece_layout.h).
// Any piece of any parameter can be read, in any dimensions, whoever wrote it and however they
// split it, which is what lets a run resume with a different world size or layout. Missing files, pieces that do not
// cover a request, or shapes that disagree are InputErrors naming the checkpoint.
// The files' headers are read up front; a piece's values only when a read overlaps it (then kept),
// so that a rank resuming on the layout that wrote the checkpoint reads its own shard's pieces and
// no other rank's.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "ckpt/piece_layout.h"
#include "ckpt/safetensors.h"

namespace xtrain::ckpt {

class CheckpointReader {
 public:
  explicit CheckpointReader(std::string dir);

  const std::string& dir() const { return dir_; }
  bool sharded() const { return in_shards_; }
  // Parameter names in the model file(s), sorted.
  std::vector<std::string> names() const;
  std::vector<int64_t> shape(const std::string& name) const;
  // kind: "model", "exp_avg" or "exp_avg_sq". A 1-D fp32 tensor of `count` elements: the
  // elements [begin, begin + count) of the parameter's flattening, or the piece `want`.
  torch::Tensor read(const std::string& kind, const std::string& name, int64_t begin, int64_t count) const;
  torch::Tensor read(const std::string& kind, const std::string& name, const PieceLayout& want) const;
  // The whole tensor in its global shape.
  torch::Tensor read_full(const std::string& kind, const std::string& name) const;
  int64_t optimizer_step() const { return optimizer_step_; }

  nlohmann::json trainer_state;
  nlohmann::json model_config;
  std::string recipe_yaml;

 private:
  struct Piece {
    PieceLayout layout;
    std::shared_ptr<const SafetensorsReader> file;
    const SafetensorsEntry* entry = nullptr;  // in file
    mutable torch::Tensor values;              // 1-D fp32, read on first use
  };
  const torch::Tensor& values_of(const Piece& piece) const;
  void add_piece(const std::string& kind, const std::string& name, Piece piece, const std::string& file);

  std::string dir_;
  bool in_shards_ = false;
  int64_t optimizer_step_ = 0;
  std::map<std::string, std::vector<int64_t>> shapes_;
  std::map<std::string, std::vector<Piece>> pieces_;  // by "<kind>/<name>"
  mutable std::mutex read_mutex_;                     // guards the pieces' values
};

}  // namespace xtrain::ckpt
