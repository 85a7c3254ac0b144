#include "train/run_state.h"

#include <chrono>
#include <filesystem>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include "ckpt/hf_folder.h"
#include "ckpt/safetensors.h"
#include "ckpt/sharded_checkpoint.h"
#include "train/non_finite_guard.h"
#include "util/build_info.h"
#include "device/device.h"
#include "util/input_error.h"

namespace xtrain::train {

namespace {

std::string to_hex(const torch::Tensor& bytes) {
  auto contiguous = bytes.contiguous();
  const auto* data = contiguous.data_ptr<uint8_t>();
  std::string hex;
  hex.reserve(contiguous.numel() * 2);
  for (int64_t i = 0; i < contiguous.numel(); ++i) hex += fmt::format("{:02x}", data[i]);
  return hex;
}

torch::Tensor from_hex(const std::string& hex) {
  auto bytes = torch::empty({static_cast<int64_t>(hex.size() / 2)}, torch::kUInt8);
  auto* data = bytes.data_ptr<uint8_t>();
  for (size_t i = 0; i + 1 < hex.size(); i += 2) data[i / 2] = static_cast<uint8_t>(std::stoul(hex.substr(i, 2), nullptr, 16));
  return bytes;
}

}  // namespace

std::string rank_state_file(int64_t rank) { return fmt::format("optimizer-rank-{}.safetensors", rank); }

RunState::RunState(parallel::ParallelModel& model, TrainedParameters& parameters, optim::AdamW& optimizer,
                   optim::DynamicLossScaler* loss_scaler, ExpertBalance& experts, const parallel::DeviceMesh& mesh,
                   RankSums& sums, torch::Device device, RunIdentity identity)
    : model_(model),
      parameters_(parameters),
      optimizer_(optimizer),
      loss_scaler_(loss_scaler),
      experts_(experts),
      mesh_(mesh),
      sums_(sums),
      device_(device),
      identity_(std::move(identity)) {}

void RunState::load(const ckpt::CheckpointReader& checkpoint, const std::string& dir) {
  torch::NoGradGuard no_grad;
  std::map<std::string, torch::Tensor> optimizer_state;
  for (size_t i = 0; i < parameters_.optimized.size(); ++i) {
    const auto& name = parameters_.optimized[i].name;
    const auto& tensor = parameters_.optimized[i].tensor;
    const auto& layout = parameters_.layouts[i];
    auto read = [&](const std::string& kind) { return checkpoint.read(kind, name, layout).view(tensor.sizes()); };
    if (checkpoint.shape(name) != layout.shape)
      throw InputError(fmt::format("{}: '{}' has shape {}, the model needs {}", dir, name,
                                   fmt::join(checkpoint.shape(name), "x"), fmt::join(layout.shape, "x")));
    tensor.copy_(read("model"));
    optimizer_state["exp_avg." + name] = read("exp_avg");
    optimizer_state["exp_avg_sq." + name] = read("exp_avg_sq");
  }
  optimizer_state["step"] = torch::tensor(checkpoint.optimizer_step(), torch::kInt64);
  optimizer_.load_state(optimizer_state);
  // An optimizer's per-rank state (1-bit Adam's errors), when the checkpoint has it: one from
  // another optimizer starts that state afresh. Under another layout the files belong to other
  // shards (and some ranks have none): the optimizer decides from the first rank's.
  if (saved_on_this_layout(checkpoint.trainer_state)) {
    const auto rank_file = dir + "/" + rank_state_file(mesh_.world().rank);
    if (std::filesystem::exists(rank_file))
      optimizer_.load_rank_state(ckpt::load_safetensors(rank_file).tensors, rank_file);
  } else if (const auto first = dir + "/" + rank_state_file(0); std::filesystem::exists(first)) {
    const auto notice = optimizer_.restart_rank_state(ckpt::load_safetensors(first).tensors, first);
    if (!notice.empty() && mesh_.world().rank == 0) fmt::print(stderr, "warning: {}\n", notice);
  }
  const auto& state = checkpoint.trainer_state;
  try {
    step = state.at("step").get<int64_t>();
    samples_consumed = state.at("samples_consumed").get<int64_t>();
    at::Generator generator = at::detail::getDefaultCPUGenerator();  // a handle to the global one
    generator.set_state(from_hex(state.at("rng_cpu").get<std::string>()));
    if (device_.is_cuda() && state.contains("rng_cuda"))
      util::set_device_rng_state(device_, from_hex(state.at("rng_cuda").get<std::string>()));
    if (state.contains("data_schedule")) saved_schedule_ = state.at("data_schedule");
    experts_.load_state(state.value("expert_bias", nlohmann::json::object()), dir + "/trainer_state.json");
    if (loss_scaler_ && state.contains("loss_scale"))
      loss_scaler_->load_state({state.at("loss_scale").get<double>(), state.at("loss_scale_finite_steps").get<int64_t>()});
  } catch (const std::exception& e) {  // missing field, wrong type, corrupt RNG state
    throw InputError(fmt::format("{}/trainer_state.json: {}", dir, e.what()));
  }
}

nlohmann::json RunState::layout() const {
  const auto& d = identity_.degrees;
  return {{"dp", d.dp},
          {"fsdp", d.fsdp},
          {"cp", d.cp},
          {"tp", d.tp},
          {"ep", d.ep},
          {"sequence_parallel", identity_.sequence_parallel}};
}

// A checkpoint without the fields predates them and was read as this layout's.
bool RunState::saved_on_this_layout(const nlohmann::json& saved) const {
  if (!saved.contains("parallel") || !saved.contains("world_size")) return true;
  return saved.at("parallel") == layout() && saved.at("world_size") == mesh_.world().size;
}

nlohmann::json RunState::trainer_state(int64_t at_step) const {
  nlohmann::json state = {
      {"step", at_step},
      {"samples_consumed", samples_consumed},
      {"tokens_seen", samples_consumed * identity_.seq_len},
      {"data_schedule", identity_.data_schedule},
      {"rng_cpu", to_hex(at::detail::getDefaultCPUGenerator().get_state())},
      {"xtrain_version", XTRAIN_VERSION},
      {"world_size", mesh_.world().size},
      {"parallel", layout()},
  };
  if (device_.is_cuda()) state["rng_cuda"] = to_hex(util::device_rng_state(device_));
  if (auto biases = experts_.state(); !biases.empty()) state["expert_bias"] = std::move(biases);
  if (loss_scaler_) {
    state["loss_scale"] = loss_scaler_->state().scale;
    state["loss_scale_finite_steps"] = loss_scaler_->state().finite_steps;
  }
  return state;
}

// A checkpoint never holds non-finite weights: `latest` and the keep policy trust it.
void RunState::check_finite_weights(int64_t at_step, const ckpt::CheckpointStore& store) {
  std::vector<torch::Tensor> trainable;
  for (const auto& p : parameters_.optimized)
    if (!p.frozen) trainable.push_back(p.tensor);
  if (sums_.sum(all_finite(trainable) ? 0.0 : 1.0) == 0) return;
  std::vector<std::pair<std::string, torch::Tensor>> named;
  for (const auto& p : parameters_.optimized) named.emplace_back(p.name, p.tensor);
  const auto latest = store.latest();
  const std::string here = describe_non_finite(named);
  throw std::runtime_error(fmt::format("the weights are not finite after step {} ({}); no checkpoint was written, {}",
                                       at_step, here.empty() ? "in another rank's shard" : here,
                                       latest ? "the latest is still " + *latest : "there is none yet"));
}

void RunState::save(int64_t at_step, CheckpointWriter& writer, const ckpt::CheckpointStore& store,
                    const nlohmann::json& model_config, const std::string& recipe_yaml,
                    const std::optional<Fault>& fault, std::vector<CheckpointAttachment> attachments) {
  check_finite_weights(at_step, store);
  const auto state = trainer_state(at_step);
  const auto snapshot_started = std::chrono::steady_clock::now();
  auto write = model_.whole() ? write_whole(writer, model_config, state, recipe_yaml, fault, at_step)
                              : write_shard(writer, model_config, state, recipe_yaml, fault, at_step);
  if (mesh_.world().rank == 0 && !attachments.empty())
    write = [write = std::move(write), attachments = std::move(attachments)](const std::string& folder) {
      write(folder);
      for (const auto& a : attachments) ckpt::save_safetensors(folder + "/" + a.file, a.tensors, a.metadata);
    };
  const double snapshot_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - snapshot_started).count();
  writer.save(at_step, std::move(write), snapshot_s);
}

namespace {

// In the background, the write works on a host copy of the state, taken now; synchronously it
// reads the live tensors.
torch::Tensor snapshot(const CheckpointWriter& writer, const torch::Tensor& tensor) {
  return writer.background() ? tensor.detach().to(torch::kCPU, /*non_blocking=*/false, /*copy=*/true) : tensor;
}

}  // namespace

CheckpointWriter::WriteFiles RunState::write_whole(CheckpointWriter& writer, const nlohmann::json& model_config,
                                                   const nlohmann::json& state, const std::string& recipe_yaml,
                                                   const std::optional<Fault>& fault, int64_t at_step) {
  ckpt::TensorMap model_state;
  for (const auto& [name, tensor] : ckpt::model_tensors(model_.model())) model_state[name] = snapshot(writer, tensor);
  auto optimizer_state = optimizer_.state();
  for (auto& [name, tensor] : optimizer_state) tensor = snapshot(writer, tensor);
  return [model_state, optimizer_state, model_config, state, recipe_yaml, &fault, at_step](const std::string& folder) {
    ckpt::save_safetensors(folder + "/model.safetensors", model_state, {{"format", "pt"}});
    inject_fault_in_save(fault, at_step);
    ckpt::save_safetensors(folder + "/optimizer.safetensors", optimizer_state);
    ckpt::write_metadata_files(folder, model_config, state, recipe_yaml);
  };
}

// Every rank of the first replica writes its shard, a piece that tensor-parallel ranks share only
// from tp rank 0, a tied table only from the first pipeline stage; the other replicas write the
// pieces only they hold (experts folded into dp, whose pieces differ across dp ranks); rank 0
// also writes the metadata.
CheckpointWriter::WriteFiles RunState::write_shard(CheckpointWriter& writer, const nlohmann::json& model_config,
                                                   const nlohmann::json& state, const std::string& recipe_yaml,
                                                   const std::optional<Fault>& fault, int64_t at_step) {
  const auto optimizer_state = optimizer_.state();
  auto rank_state = optimizer_.rank_state();
  for (auto& [name, tensor] : rank_state) tensor = snapshot(writer, tensor);
  std::vector<ckpt::ParameterPiece> pieces;
  for (size_t i = 0; i < parameters_.optimized.size(); ++i) {
    if (!parameters_.primary[i] || parameters_.replica[i] ||
        (parameters_.copies[i] > 1 && mesh_.coordinate(parallel::Dim::tp) != 0))
      continue;
    const auto& name = parameters_.optimized[i].name;
    pieces.push_back({name, parameters_.layouts[i], snapshot(writer, parameters_.optimized[i].tensor),
                      snapshot(writer, optimizer_state.at("exp_avg." + name)),
                      snapshot(writer, optimizer_state.at("exp_avg_sq." + name))});
  }
  const bool writes_shard = mesh_.group(parallel::Dim::dp)->rank() == 0 || !pieces.empty();
  return [pieces, rank_state, rank = mesh_.world().rank, writes_shard, steps = optimizer_.steps_taken(),
          chief = mesh_.world().rank == 0, model_config, state, recipe_yaml, &fault,
          at_step](const std::string& folder) {
    if (writes_shard) ckpt::write_checkpoint_shard(folder, rank, pieces, steps);
    if (!rank_state.empty()) ckpt::save_safetensors(folder + "/" + rank_state_file(rank), rank_state);
    inject_fault_in_save(fault, at_step);
    if (chief) ckpt::write_metadata_files(folder, model_config, state, recipe_yaml);
  };
}

std::optional<Rollback> RunState::roll_back(const ckpt::CheckpointStore& store, CheckpointWriter& writer) {
  writer.finish();                    // a background save in flight is committed first
  mesh_.group(parallel::Dim::world)->barrier();    // and seen by every rank
  const auto choice = store.newest_intact(/*strict=*/false);
  if (!choice) return std::nullopt;
  const int64_t data_position = samples_consumed;
  load(ckpt::CheckpointReader(choice->dir), choice->dir);
  Rollback rollback{choice->dir, samples_consumed, data_position};
  samples_consumed = data_position;
  return rollback;
}

}  // namespace xtrain::train
