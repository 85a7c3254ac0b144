#include "ckpt/checkpoint_reader.h"

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include "ckpt/safetensors.h"
#include "util/durable_file.h"
#include "util/input_error.h"

namespace fs = std::filesystem;

namespace xtrain::ckpt {
namespace {

nlohmann::json read_json(const std::string& path) {
  try {
    return nlohmann::json::parse(util::read_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: invalid JSON: {}", path, e.what()));
  }
}

// A piece's place from its metadata; without "offsets" and "sizes" (checkpoints written before
// pieces had boxes) the box is the whole tensor.
PieceLayout piece_layout(const nlohmann::json& layout, int64_t count, const std::string& path, const std::string& name) {
  try {
    auto piece = PieceLayout::range(layout.at("shape").get<std::vector<int64_t>>(), 0, count);
    if (layout.contains("offsets") || layout.contains("sizes")) {
      piece.offsets = layout.at("offsets").get<std::vector<int64_t>>();
      piece.sizes = layout.at("sizes").get<std::vector<int64_t>>();
    }
    piece.begin = layout.at("begin").get<int64_t>();
    if (const auto problem = piece.problem(); !problem.empty())
      throw InputError(fmt::format("{}: the piece of '{}': {}", path, name, problem));
    return piece;
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: metadata of '{}': {}", path, name, e.what()));
  }
}

}  // namespace

CheckpointReader::CheckpointReader(std::string dir) : dir_(std::move(dir)) {
  if (!fs::is_directory(dir_)) throw InputError(fmt::format("checkpoint folder not found: {}", dir_));
  std::vector<std::string> shard_files;
  for (const auto& entry : fs::directory_iterator(dir_)) {
    const auto file = entry.path().filename().string();
    if (file.rfind("shard-", 0) == 0 && entry.path().extension() == ".safetensors") shard_files.push_back(file);
  }
  std::sort(shard_files.begin(), shard_files.end());
  in_shards_ = !shard_files.empty();
  auto numel_of = [](const SafetensorsEntry& entry) {
    int64_t numel = 1;
    for (int64_t size : entry.shape) numel *= size;
    return numel;
  };
  if (in_shards_) {
    for (const auto& file : shard_files) {
      auto reader = std::make_shared<const SafetensorsReader>(dir_ + "/" + file);
      const std::string& path = reader->path();
      for (const auto& [key, value] : reader->metadata()) {
        if (key == "format") continue;
        if (key == "optimizer_step") {
          optimizer_step_ = std::stoll(value);
          continue;
        }
        nlohmann::json layout;
        try {
          layout = nlohmann::json::parse(value);
        } catch (const nlohmann::json::exception&) {
          throw InputError(fmt::format("{}: metadata of '{}' is not JSON", path, key));
        }
        for (const char* kind : {"model", "exp_avg", "exp_avg_sq"}) {
          const auto* entry = reader->find(std::string(kind) + "/" + key);
          if (!entry)
            throw InputError(fmt::format("{}: no tensor {}/{} for the piece its metadata lists", path, kind, key));
          add_piece(kind, key, {piece_layout(layout, numel_of(*entry), path, key), reader, entry, {}}, path);
        }
      }
    }
  } else {
    auto model = std::make_shared<const SafetensorsReader>(dir_ + "/model.safetensors");
    for (const auto& entry : model->entries())
      add_piece("model", entry.name, {PieceLayout::whole(entry.shape), model, &entry, {}}, model->path());
    auto optimizer = std::make_shared<const SafetensorsReader>(dir_ + "/optimizer.safetensors");
    for (const auto& entry : optimizer->entries()) {
      if (entry.name == "step") {
        optimizer_step_ = optimizer->read(entry, 0, 1).to(torch::kInt64).item<int64_t>();
        continue;
      }
      const auto dot = entry.name.find('.');
      if (dot == std::string::npos)
        throw InputError(fmt::format("{}: unexpected entry '{}'", optimizer->path(), entry.name));
      add_piece(entry.name.substr(0, dot), entry.name.substr(dot + 1),
                {PieceLayout::whole(entry.shape), optimizer, &entry, {}}, optimizer->path());
    }
  }
  trainer_state = read_json(dir_ + "/trainer_state.json");
  model_config = read_json(dir_ + "/config.json");
  recipe_yaml = util::read_file(dir_ + "/recipe.yaml");
}

void CheckpointReader::add_piece(const std::string& kind, const std::string& name, Piece piece,
                                 const std::string& file) {
  const auto& shape = piece.layout.shape;
  auto [it, inserted] = shapes_.emplace(name, shape);
  if (!inserted && it->second != shape)
    throw InputError(fmt::format("{}: '{}' has shape {} here and {} elsewhere in the checkpoint", file, name,
                                 fmt::join(shape, "x"), fmt::join(it->second, "x")));
  pieces_[kind + "/" + name].push_back(std::move(piece));
}

std::vector<std::string> CheckpointReader::names() const {
  std::vector<std::string> names;
  for (const auto& [key, pieces] : pieces_)
    if (key.rfind("model/", 0) == 0) names.push_back(key.substr(6));
  return names;
}

std::vector<int64_t> CheckpointReader::shape(const std::string& name) const {
  auto it = shapes_.find(name);
  if (it == shapes_.end()) throw InputError(fmt::format("{}: the checkpoint has no parameter '{}'", dir_, name));
  return it->second;
}

torch::Tensor CheckpointReader::read(const std::string& kind, const std::string& name, int64_t begin,
                                     int64_t count) const {
  return read(kind, name, PieceLayout::range(shape(name), begin, count));
}

torch::Tensor CheckpointReader::read(const std::string& kind, const std::string& name, const PieceLayout& want) const {
  auto it = pieces_.find(kind + "/" + name);
  if (it == pieces_.end()) throw InputError(fmt::format("{}: the checkpoint has no {} for '{}'", dir_, kind, name));
  if (const auto problem = want.problem(); !problem.empty() || want.shape != shape(name))
    throw std::invalid_argument(fmt::format("{}: a read of '{}' as a piece of [{}]: {}", dir_, name,
                                            fmt::join(want.shape, ", "), problem));
  auto out = torch::empty({want.count}, torch::kFloat32);
  int64_t covered = 0;
  for (const auto& piece : it->second)
    if (pieces_overlap(piece.layout, want)) covered += copy_overlap(piece.layout, values_of(piece), want, out);
  if (covered != want.count)
    throw InputError(fmt::format("{}: the pieces of {} '{}' cover {} of the {} elements [{}, {}) needed; a shard "
                                 "file is missing",
                                 dir_, kind, name, covered, want.count, want.begin, want.begin + want.count));
  return out;
}

const torch::Tensor& CheckpointReader::values_of(const Piece& piece) const {
  std::lock_guard<std::mutex> lock(read_mutex_);
  if (!piece.values.defined())
    piece.values = piece.file->read(*piece.entry, 0, piece.layout.count).to(torch::kFloat32).reshape(-1);
  return piece.values;
}

torch::Tensor CheckpointReader::read_full(const std::string& kind, const std::string& name) const {
  const auto dims = shape(name);
  int64_t numel = 1;
  for (auto d : dims) numel *= d;
  return read(kind, name, 0, numel).view(dims);
}

}  // namespace xtrain::ckpt
