#include "train/run_setup.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <fmt/format.h>
#include <torch/torch.h>

#include "ckpt/manifest.h"
#include "config/pipeline_layout.h"
#include "model/spec/model_spec.h"
#include "model/attention/sdpa_attention.h"
#include "train/precision.h"
#include "util/input_error.h"

namespace fs = std::filesystem;

namespace xtrain::train {

std::optional<ResumeFrom> checkpoint_to_resume(const config::Recipe& recipe, const ckpt::CheckpointStore& store,
                                               bool chief) {
  const auto& resume = recipe.checkpoint.resume;
  switch (resume.kind) {
    case config::ResumeKind::never: return std::nullopt;
    case config::ResumeKind::folder: return ResumeFrom{resume.folder, ckpt::verify_resumable(resume.folder).summary()};
    case config::ResumeKind::automatic:
    case config::ResumeKind::strict: break;
  }
  auto choice = store.newest_intact(resume.kind == config::ResumeKind::strict);
  if (!choice) return std::nullopt;
  if (chief)
    for (const auto& skipped : choice->skipped)
      fmt::print(stderr, "warning: skipping damaged checkpoint {}; resuming from {} instead\n", skipped, choice->dir);
  return ResumeFrom{choice->dir, choice->check.summary()};
}

bool resumes_from_latest(const config::Recipe& recipe) {
  const auto kind = recipe.checkpoint.resume.kind;
  return kind == config::ResumeKind::automatic || kind == config::ResumeKind::strict;
}

// Out of memory, reported as what to change rather than as a trace.
[[noreturn]] void out_of_memory(int64_t step, const std::string& what, double peak_rss, double peak_device,
                                const config::Recipe& recipe) {
  const auto first_line = what.substr(0, what.find('\n'));
  throw std::runtime_error(fmt::format(
      "out of memory at step {} (peak host memory {:.0f} MiB{}): {}. Options that need less memory: "
      "train.micro_batch_size (now {}; gradient accumulation keeps the global batch), memory.recompute: full "
      "(now {}), memory.offload_activations: true, memory.chunked_loss (now {}), memory.attention: sdpa or "
      "blockwise (now {}), more ranks with parallel.fsdp, train.dtype: bf16 (now {})",
      step, peak_rss, peak_device > 0 ? fmt::format(", device {:.0f} MiB", peak_device) : "", first_line,
      recipe.train.micro_batch_size, to_string(recipe.memory.recompute), recipe.memory.chunked_loss,
      to_string(recipe.memory.attention), to_string(recipe.train.dtype)));
}

// A run folder that cannot be written fails now, before any step is spent. A symbolic link as
// run.dir is refused: the run would write wherever it points (a link to / would put checkpoints/
// and metrics.jsonl there), and the real path costs the user nothing to give.
void prepare_run_folder(const std::string& dir) {
  std::string entry = dir;  // "runs/x/" follows the link "runs/x"; the entry itself is what counts
  while (entry.size() > 1 && entry.back() == '/') entry.pop_back();
  if (std::error_code ignored; fs::is_symlink(fs::symlink_status(entry, ignored)))
    throw InputError(fmt::format("run.dir {} is a symbolic link (to {}); a run writes only into a real folder: set "
                                 "run.dir to the folder itself",
                                 dir, fs::read_symlink(entry, ignored).string()));
  std::error_code error;
  fs::create_directories(dir, error);
  if (!error && ::access(dir.c_str(), W_OK) != 0) error = std::error_code(errno, std::generic_category());
  if (error)
    throw std::runtime_error(fmt::format("cannot write the run folder {}: {}; set run.dir to a writable folder", dir,
                                         error.message()));
}

bool is_out_of_memory(const c10::Error& error) {
  const std::string what = error.what_without_backtrace();
  return what.find("can't allocate memory") != std::string::npos || what.find("out of memory") != std::string::npos;
}


// The name prefixes of the parts model.freeze names (the recipe check knows them all).
std::vector<std::string> frozen_prefixes(const config::Recipe& recipe) {
  std::vector<std::string> prefixes;
  for (const auto& [part, prefix] : model::model_spec(recipe.model.family).parts)
    if (std::find(recipe.model.freeze.begin(), recipe.model.freeze.end(), part) != recipe.model.freeze.end())
      prefixes.push_back(prefix);
  return prefixes;
}

bool has_prefix(const std::string& name, const std::vector<std::string>& prefixes) {
  return std::any_of(prefixes.begin(), prefixes.end(),
                     [&name](const std::string& prefix) { return name.rfind(prefix, 0) == 0; });
}

// dist.backend auto: NCCL for CUDA tensors, Gloo for CPU ones.
parallel::CommBackend comm_backend(config::Backend setting, const torch::Device& device) {
  if (setting == config::Backend::gloo && device.is_cuda())
    throw InputError("dist.backend: gloo, but train.device is cuda; xtrain's collectives run where the tensors "
                     "are: use dist.backend: nccl (or auto)");
  if (setting == config::Backend::nccl && !device.is_cuda())
    throw InputError("dist.backend: nccl needs train.device: cuda (this run trains on the CPU); use gloo or auto");
  return device.is_cuda() ? parallel::CommBackend::nccl : parallel::CommBackend::gloo;
}

// memory.attention auto: the fused kernels wherever they take the batch (every unpacked batch; packed
// ones where varlen flash runs), else the segmented naive kernel up to 2048 tokens and the
// blockwise one above.
namespace {
memory::Attention auto_attention(const config::Recipe& recipe, const torch::Device& device) {
  if (!recipe.data.pack || model::varlen_attention_available(device, compute_type(recipe.train.dtype)))
    return memory::Attention::sdpa;
  return recipe.data.seq_len > 2048 ? memory::Attention::blockwise : memory::Attention::naive;
}
}  // namespace

memory::MemoryOptions memory_options(const config::Recipe& recipe, const torch::Device& device) {
  const auto& m = recipe.memory;
  const auto attention = m.attention == memory::Attention::automatic ? auto_attention(recipe, device) : m.attention;
  // The fused kernels (model/kernels/fused_kernels.h): fp32 on the CPU; fp32, bf16 and fp16 on CUDA.
  if (m.fused_kernels == memory::FusedKernels::on && device.is_cpu() && recipe.train.dtype != config::Dtype::fp32)
    throw InputError(fmt::format(
        "memory.fused_kernels: on, but this run computes in {} on the CPU, where the fused kernels are fp32 only "
        "(on CUDA they take fp32, bf16 and fp16); use auto (fused wherever a kernel exists) or off",
        to_string(recipe.train.dtype)));
  return {m.recompute,
          m.recompute_ratio,
          m.offload_activations,
          attention,
          m.attention_block_size,
          m.vision_recompute_ratio,
          m.fused_kernels != memory::FusedKernels::off};
}

// train.threads 0: the cores shared among this machine's ranks, unless OMP_NUM_THREADS (set by
// torchrun and by users) already decides.
void apply_threads(const config::Recipe& recipe, int64_t local_ranks) {
  if (recipe.train.threads > 0) {
    torch::set_num_threads(static_cast<int>(recipe.train.threads));
  } else if (!std::getenv("OMP_NUM_THREADS")) {
    const int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
    torch::set_num_threads(static_cast<int>(std::max<int64_t>(1, cores / local_ranks)));
  }
}


model::Float8Recipe float8_recipe(const config::PrecisionSection& precision) {
  model::Float8Recipe recipe{precision.fp8};
  switch (precision.fp8_grad) {
    case config::Float8GradFormat::e4m3: recipe.grad_format = c10::ScalarType::Float8_e4m3fn; break;
    case config::Float8GradFormat::e5m2: recipe.grad_format = c10::ScalarType::Float8_e5m2; break;
    case config::Float8GradFormat::automatic:  // torchao's tensorwise default; its rowwise recipe and DeepSeek-V3
      recipe.grad_format = precision.fp8 == model::Float8Scaling::tensorwise ? c10::ScalarType::Float8_e5m2
                                                                             : c10::ScalarType::Float8_e4m3fn;
      break;
  }
  return recipe;
}

std::string float8_recipe_warning(const config::Recipe& recipe) {
  const auto& precision = recipe.precision;
  if (precision.fp8 != model::Float8Scaling::rowwise || precision.fp8_grad != config::Float8GradFormat::automatic ||
      recipe.model.num_experts == 0)
    return {};
  // Measured: docs/results.md, "FP8" (moe-demo, 480 steps, twelve seeds against bf16).
  return "precision.fp8 rowwise on a model with experts: its e4m3 output gradients (fp8_grad auto, torchao's rowwise "
         "recipe) quantize the experts' weight gradients coarsely; on moe-demo they ended 3.8% above bf16 "
         "(e5m2 gradients: 1.5% above; rowwise_with_gw_hp: 0.2% below; docs/results.md, \"FP8\"); "
         "set precision.fp8_grad: e5m2 or precision.fp8: rowwise_with_gw_hp, "
         "or fp8_grad: e4m3 to keep torchao's recipe";
}

// Warned of rather than refused: turning precision.fp8 off with --set, to compare a recipe's FP8
// run with its bf16 one, leaves the recipe's other FP8 keys in place.
std::vector<std::string> float8_unused_key_warnings(const config::PrecisionSection& precision) {
  if (precision.fp8 != model::Float8Scaling::off) return {};
  std::vector<std::string> warnings;
  const std::pair<const char*, std::string> keys[] = {
      {"precision.fp8_grad",
       precision.fp8_grad == config::Float8GradFormat::automatic ? "" : to_string(precision.fp8_grad)},
      {"precision.fp8_all_gather",
       precision.fp8_all_gather == config::Float8AllGather::automatic ? "" : to_string(precision.fp8_all_gather)}};
  for (const auto& [key, value] : keys)
    if (!value.empty())
      warnings.push_back(fmt::format("{} {} has no effect: precision.fp8 is off, so no FP8 GEMM runs and this run "
                                     "trains in train.dtype; set precision.fp8 to use it, or leave {} at auto",
                                     key, value, key));
  return warnings;
}

parallel::ParallelizeOptions parallelize_options(const config::Recipe& recipe, const torch::Device& device) {
  parallel::ParallelizeOptions options;
  options.memory = memory_options(recipe, device);
  options.sequence_parallel = recipe.parallel.sequence_parallel;
  options.expert_micro_batches = recipe.parallel.intra_layer_micro_batch;
  options.virtual_stages = recipe.parallel.pp_virtual_stages;
  options.pipeline_v_shape = config::pipeline_placement(recipe.parallel.pp_schedule, recipe.parallel.pp,
                                                        recipe.parallel.pp_virtual_stages)
                                 .v_shape;
  options.pipeline_layers = recipe.parallel.pp_layers;
  options.reshard_after_forward = recipe.parallel.reshard_after_forward;
  options.router_aux_loss_global_average = recipe.model.router_aux_loss_global_average;
  options.context_kind = recipe.parallel.cp_kind;
  options.float8 = float8_recipe(recipe.precision);
  const auto scaling = recipe.precision.fp8;
  // A rowwise weight is quantized twice (forward and input gradient), so no one fp8 copy serves.
  options.float8_all_gather = recipe.precision.fp8_all_gather != config::Float8AllGather::off &&
                              scaling != model::Float8Scaling::off && !model::is_rowwise(scaling);
  return options;
}

}  // namespace xtrain::train
