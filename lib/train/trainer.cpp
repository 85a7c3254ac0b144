#include "train/trainer.h"

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>
#include <cmath>
#include <filesystem>
#include <map>
#include <limits>
#include <optional>

#include <fmt/format.h>
#include <torch/torch.h>

#include "ckpt/checkpoint.h"
#include "ckpt/checkpoint_reader.h"
#include "ckpt/sharded_checkpoint.h"
#include "ckpt/hf_llama.h"
#include "config/option_registry.h"
#include "config/recipe_loader.h"
#include "data/batch_loader.h"
#include "data/batch_schedule.h"
#include "data/micro_batch.h"
#include "data/tokenizer.h"
#include "parallel/device_mesh.h"
#include "parallel/fully_sharded.h"
#include "parallel/watchdog.h"
#include "parallel/world.h"
#include "memory/memory_policy.h"
#include "model/sdpa_attention.h"
#include "optim/adamw.h"
#include "optim/grad_clip.h"
#include "optim/loss_scaler.h"
#include "optim/lr_schedule.h"
#include "train/checkpoint_writer.h"
#include "train/evaluate.h"
#include "train/fault_injection.h"
#include "train/metrics_log.h"
#include "train/model_factory.h"
#include "train/precision.h"
#include "train/recipe_data.h"
#include "train/non_finite_guard.h"
#include "train/spike_detector.h"
#include "train/resume_changes.h"
#include "train/stop_signal.h"
#include "train/training_loss.h"
#include "util/blas_probe.h"
#include "util/build_info.h"
#include "util/device.h"
#include "util/durable_file.h"
#include "util/exit_codes.h"
#include "util/input_error.h"
#include "util/numeric_fault.h"
#include "util/signal_names.h"

namespace fs = std::filesystem;

namespace xtrain::train {

namespace {

constexpr const char* kPersistentSpikes =
    "the loss has moved to a new level or the run is diverging. Raise train.spike_zscore or train.spike_window, or "
    "set train.spike: off";

using Clock = std::chrono::steady_clock;

struct RankSpread {
  double mean = 0, max = 0;
  int64_t argmax = 0;
};

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;  // ru_maxrss is in KiB on Linux
}

std::string format_duration(double seconds) {
  const auto total = static_cast<int64_t>(std::llround(seconds));
  if (total >= 3600) return fmt::format("{}h{:02}m", total / 3600, (total % 3600) / 60);
  if (total >= 60) return fmt::format("{}m{:02}s", total / 60, total % 60);
  return fmt::format("{}s", total);
}

std::string format_rate(double tokens_per_s) {
  if (tokens_per_s >= 1e6) return fmt::format("{:.2f}M", tokens_per_s / 1e6);
  if (tokens_per_s >= 1e3) return fmt::format("{:.1f}k", tokens_per_s / 1e3);
  return fmt::format("{:.0f}", tokens_per_s);
}

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

// The checkpoint to continue from, verified against its manifest: checkpoint.resume auto (or
// strict) takes `latest`, or the newest intact one when `latest` is damaged; a folder the user
// named must verify. Warnings and the verification's cost go to rank 0's output.
struct ResumeFrom {
  std::string dir;
  std::string verification;  // "verified 3.2 MiB in 0.01 s"
};

std::optional<ResumeFrom> checkpoint_to_resume(const config::Recipe& recipe, const ckpt::CheckpointStore& store,
                                               bool chief) {
  const auto& resume = recipe.checkpoint.resume;
  if (resume == "never") return std::nullopt;
  if (resume != "auto" && resume != "strict") return ResumeFrom{resume, ckpt::verify_checkpoint(resume).summary()};
  auto choice = store.newest_intact(resume == "strict");
  if (!choice) return std::nullopt;
  if (chief)
    for (const auto& skipped : choice->skipped)
      fmt::print(stderr, "warning: skipping damaged checkpoint {}; resuming from {} instead\n", skipped, choice->dir);
  return ResumeFrom{choice->dir, choice->check.summary()};
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
      recipe.train.micro_batch_size, recipe.memory.recompute, recipe.memory.chunked_loss, recipe.memory.attention,
      recipe.train.dtype));
}

// A run folder that cannot be written fails now, before any step is spent.
void prepare_run_folder(const std::string& dir) {
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

std::vector<optim::NamedParameter> named_parameters(model::LlamaForCausalLM& model) {
  std::vector<optim::NamedParameter> parameters;
  for (const auto& item : model->named_parameters())
    parameters.push_back({item.key(), item.value(), model::decays(item.key(), item.value())});
  return parameters;
}

// dist.backend auto: NCCL for CUDA tensors, Gloo for CPU ones.
parallel::CommBackend comm_backend(const std::string& setting, const torch::Device& device) {
  if (setting == "gloo" && device.is_cuda())
    throw InputError("dist.backend: gloo, but train.device is cuda; xtrain's collectives run where the tensors "
                     "are: use dist.backend: nccl (or auto)");
  if (setting == "nccl" && !device.is_cuda())
    throw InputError("dist.backend: nccl needs train.device: cuda (this run trains on the CPU); use gloo or auto");
  return device.is_cuda() ? parallel::CommBackend::nccl : parallel::CommBackend::gloo;
}

// memory.attention auto: the fused kernels wherever they take the batch (every unpacked batch; packed
// ones where varlen flash runs), else the segmented naive kernel up to 2048 tokens and the
// blockwise one above.
std::string auto_attention(const config::Recipe& recipe, const torch::Device& device) {
  const auto compute = recipe.train.dtype == "bf16" ? torch::kBFloat16
                       : recipe.train.dtype == "fp16" ? torch::kHalf
                                                      : torch::kFloat32;
  if (!recipe.data.pack || model::varlen_attention_available(device, compute)) return "sdpa";
  return recipe.data.seq_len > 2048 ? "blockwise" : "naive";
}

memory::MemoryOptions memory_options(const config::Recipe& recipe, const torch::Device& device) {
  const auto& m = recipe.memory;
  const std::string attention = m.attention == "auto" ? auto_attention(recipe, device) : m.attention;
  return {m.recompute, m.recompute_ratio, m.offload_activations, attention, m.attention_block_size};
}

// train.threads 0: the cores shared among this machine's ranks, unless OMP_NUM_THREADS (set by
// torchrun and by users) already decides.
void apply_threads(const config::Recipe& recipe, int64_t local_ranks = 1) {
  if (recipe.train.threads > 0) {
    torch::set_num_threads(static_cast<int>(recipe.train.threads));
  } else if (!std::getenv("OMP_NUM_THREADS")) {
    const int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
    torch::set_num_threads(static_cast<int>(std::max<int64_t>(1, cores / local_ranks)));
  }
}

// Where a run is, for the messages of failures that unwind out of it.
struct RunProgress {
  int64_t step = 0;
  torch::Device device = torch::kCPU;
};

int train_steps(const config::Recipe& recipe, const TrainOptions& options, RunProgress& progress);

}  // namespace

int train(const config::Recipe& recipe, const TrainOptions& options) {
  RunProgress progress;
  auto device_mib = [&] { return static_cast<double>(util::peak_device_memory_bytes(progress.device)) / (1 << 20); };
  try {
    return train_steps(recipe, options, progress);
  } catch (const c10::OutOfMemoryError& e) {
    out_of_memory(progress.step, e.what_without_backtrace(), peak_rss_mib(), device_mib(), recipe);
  } catch (const std::bad_alloc& e) {
    out_of_memory(progress.step, e.what(), peak_rss_mib(), device_mib(), recipe);
  } catch (const c10::Error& e) {
    if (!is_out_of_memory(e)) throw;
    out_of_memory(progress.step, e.what_without_backtrace(), peak_rss_mib(), device_mib(), recipe);
  }
}

namespace {

int train_steps(const config::Recipe& recipe, const TrainOptions& options, RunProgress& progress) {
  const auto world = parallel::discover_world();
  apply_threads(recipe, world.local_size);
  const bool chief = world.rank == 0;
  const auto degrees = parallel::resolve_degrees({recipe.parallel.dp, recipe.parallel.fsdp, recipe.parallel.tp,
                                              recipe.parallel.pp, recipe.parallel.ep},
                                             world.size);
  const int64_t data_ranks = degrees.dp * degrees.fsdp;
  const auto& t = recipe.train;
  if (t.global_batch_size % (data_ranks * t.micro_batch_size) != 0)
    throw InputError(fmt::format(
        "train.global_batch_size ({}) must be a multiple of train.micro_batch_size ({}) x data-parallel ranks ({}) "
        "= {}; the global batch does not depend on the number of ranks",
        t.global_batch_size, t.micro_batch_size, data_ranks, t.micro_batch_size * data_ranks));
  if (options.stop_at_step < 0 || options.stop_at_step > recipe.train.steps)
    throw InputError(fmt::format("--stop-at-step {} is outside 1..train.steps ({})", options.stop_at_step,
                                 recipe.train.steps));
  const auto fault = planned_fault(world.rank, world.restart_count);
  util::numeric_fault();  // a malformed XTRAIN_NUMERIC_FAULT fails here, before any work
  // Its own copy: the spike fault is consumed when it fires, while a background save reads `fault`.
  std::optional<Fault> injected_spike = fault;

  // Everything that can fail on bad input happens before the run folder is created.
  auto tokenizer = data::make_tokenizer(recipe.data.tokenizer);
  auto train_data = load_recipe_dataset("data.train", recipe.data.train, *tokenizer, recipe, recipe.data.shuffle);
  std::unique_ptr<data::SampleDataset> eval_data;
  if (!recipe.data.eval.empty()) eval_data = load_recipe_dataset("data.eval", recipe.data.eval, *tokenizer, recipe, false);
  const auto device = util::choose_device(t.device, world.local_rank);
  progress.device = device;
  const auto backend = comm_backend(recipe.dist.backend, device);
  ckpt::CheckpointStore store(recipe.run.dir, recipe.checkpoint.keep);
  const auto resume = checkpoint_to_resume(recipe, store, chief);
  auto model = build_model(recipe);  // the same seed on every rank: the same initial weights
  if (!recipe.model.init_from.empty() && !resume) {
    const auto started = Clock::now();
    const int64_t tensors = import_initial_weights(model, recipe.model.init_from);
    if (chief)
      fmt::print("model: {} tensors from {} ({:.2f} s)\n", tensors, recipe.model.init_from,
                 std::chrono::duration<double>(Clock::now() - started).count());
  }
  check_numeric_fault_parameter(named_parameters(model));
  const int64_t total_parameters = model->num_parameters();  // before sharding leaves each rank a piece
  model->to(device);  // initialised on the CPU, so every device starts from the same weights
  auto offloader = memory::apply_memory_policy(model, memory_options(recipe, device));
  const int64_t loss_chunk = loss_chunk_tokens(recipe);

  auto mesh = parallel::build_mesh(world, degrees, recipe.dist.timeout_s, backend, recipe.dist.init_timeout_s);
  parallel::Watchdog watchdog(mesh.process_groups(), world, recipe.dist.watchdog_s);
  // Scalars that ranks sum (loss, token counts, flags) live where the backend reduces them.
  const auto scalar_options = torch::TensorOptions().dtype(torch::kFloat64).device(device);
  std::unique_ptr<parallel::FullyShardedModel> sharded;
  std::vector<optim::NamedParameter> optimized;
  std::vector<int64_t> piece_begin;               // first element of each optimized tensor in its parameter
  std::vector<std::vector<int64_t>> piece_shape;  // and that parameter's whole shape
  if (world.distributed()) {
    sharded = std::make_unique<parallel::FullyShardedModel>(model, mesh, recipe.parallel.reshard_after_forward);
    for (auto* piece : sharded->parameters()) {
      optimized.push_back({piece->name, piece->local, piece->shape.size() >= 2});
      piece_begin.push_back(piece->begin);
      piece_shape.push_back(piece->shape);
    }
  } else {
    optimized = named_parameters(model);
    piece_begin.assign(optimized.size(), 0);
    for (const auto& p : optimized) piece_shape.push_back(p.tensor.sizes().vec());
  }
  optim::AdamW optimizer(optimized,
                         {recipe.optim.betas[0], recipe.optim.betas[1], recipe.optim.eps, recipe.optim.weight_decay});
  std::vector<torch::Tensor> parameters;  // what the optimizer updates: whole tensors, or this rank's pieces
  for (const auto& p : optimized) parameters.push_back(p.tensor);
  std::optional<optim::DynamicLossScaler> loss_scaler;
  if (recipe.train.dtype == "fp16") {
    optim::LossScalerOptions scaling;
    scaling.initial_scale = recipe.precision.loss_scale_initial;
    scaling.growth_interval = recipe.precision.loss_scale_growth_interval;
    loss_scaler.emplace(scaling);
  }

  int64_t step = 0;
  int64_t samples_consumed = 0;
  nlohmann::json saved_schedule;  // the data schedule of the checkpoint's run
  const nlohmann::json data_schedule = {{"global_batch_size", t.global_batch_size},
                                        {"balance_window", recipe.data.balance_window},
                                        {"pack", recipe.data.pack}};
  // Weights, optimizer state, step, data position and RNG from a checkpoint: at the start of a
  // resumed run, and when train.spike rolls back.
  auto load_checkpoint_state = [&](const ckpt::CheckpointReader& checkpoint, const std::string& resume_dir) {
    torch::NoGradGuard no_grad;
    std::map<std::string, torch::Tensor> optimizer_state;
    for (size_t i = 0; i < optimized.size(); ++i) {
      const auto& [name, tensor, decay] = optimized[i];
      const int64_t numel = tensor.numel();
      auto read = [&](const std::string& kind) {
        return checkpoint.read(kind, name, piece_begin[i], numel).view(tensor.sizes());
      };
      if (checkpoint.shape(name) != piece_shape[i])
        throw InputError(fmt::format("{}: '{}' has shape {}, the model needs {}", resume_dir, name,
                                     fmt::join(checkpoint.shape(name), "x"), fmt::join(piece_shape[i], "x")));
      tensor.copy_(read("model"));
      optimizer_state["exp_avg." + name] = read("exp_avg");
      optimizer_state["exp_avg_sq." + name] = read("exp_avg_sq");
    }
    optimizer_state["step"] = torch::tensor(checkpoint.optimizer_step(), torch::kInt64);
    optimizer.load_state(optimizer_state);
    try {
      step = checkpoint.trainer_state.at("step").get<int64_t>();
      samples_consumed = checkpoint.trainer_state.at("samples_consumed").get<int64_t>();
      at::Generator generator = at::detail::getDefaultCPUGenerator();  // a handle to the global one
      generator.set_state(from_hex(checkpoint.trainer_state.at("rng_cpu").get<std::string>()));
      if (device.is_cuda() && checkpoint.trainer_state.contains("rng_cuda"))
        util::set_device_rng_state(device, from_hex(checkpoint.trainer_state.at("rng_cuda").get<std::string>()));
      if (checkpoint.trainer_state.contains("data_schedule")) saved_schedule = checkpoint.trainer_state.at("data_schedule");
      if (loss_scaler && checkpoint.trainer_state.contains("loss_scale"))
        loss_scaler->load_state({checkpoint.trainer_state.at("loss_scale").get<double>(),
                                 checkpoint.trainer_state.at("loss_scale_finite_steps").get<int64_t>()});
    } catch (const std::exception& e) {  // missing field, wrong type, corrupt RNG state
      throw InputError(fmt::format("{}/trainer_state.json: {}", resume_dir, e.what()));
    }
  };
  std::vector<std::string> resume_notices;
  if (resume) {
    const std::string& resume_dir = resume->dir;
    ckpt::CheckpointReader checkpoint(resume_dir);
    check_model_unchanged(recipe, checkpoint.recipe_yaml, resume_dir);
    load_checkpoint_state(checkpoint, resume_dir);
    // A balanced order sorts windows of balance_window x global_batch_size samples by a cost
    // that depends on data.pack: continuing it needs the same three (any number of ranks will do).
    if (recipe.data.balance_window > 0 && !saved_schedule.is_null() && saved_schedule != data_schedule)
      throw InputError(fmt::format(
          "{}: this run balanced its data with train.global_batch_size {}, data.balance_window {} and data.pack {}, "
          "the recipe says {}, {} and {}; the balanced sample order depends on all three, so resume with the "
          "checkpoint's values",
          resume_dir, saved_schedule.value("global_batch_size", 0), saved_schedule.value("balance_window", 0),
          saved_schedule.value("pack", false), t.global_batch_size, recipe.data.balance_window, recipe.data.pack));
    if (recipe.data.balance_window > 0 && samples_consumed % t.global_batch_size != 0)
      throw InputError(fmt::format("{}: {} samples consumed is not a whole number of global batches of {}; resume "
                                   "with the checkpoint's train.global_batch_size or without data.balance_window",
                                   resume_dir, samples_consumed, t.global_batch_size));
    // After the balance checks, whose messages say more about their case.
    resume_notices = check_resume_changes(recipe, checkpoint.recipe_yaml, resume_dir, options.allow_changed);
    if (chief) {
      fmt::print("resumed from {} at step {} ({})\n", resume_dir, step, resume->verification);
      for (const auto& notice : resume_notices) fmt::print("notice: changed since the checkpoint: {}\n", notice);
    }
  }

  if (chief) {
    prepare_run_folder(recipe.run.dir);
    store.remove_stale_temp_folders();
  }
  mesh.group("world")->barrier();
  std::optional<MetricsLog> metrics;
  if (chief) metrics.emplace(recipe.run.dir + "/metrics.jsonl", step);
  const std::string recipe_yaml = config::dump_recipe(recipe);
  install_stop_signal_handlers(util::parse_signal_list(t.stop_signals));

  const int64_t per_rank = t.global_batch_size / data_ranks;
  const int64_t accumulation = per_rank / t.micro_batch_size;
  const int64_t tokens_per_step = t.global_batch_size * recipe.data.seq_len;
  const int64_t last_step = options.stop_at_step > 0 ? options.stop_at_step : t.steps;
  const optim::LrSchedule schedule{recipe.optim.lr, recipe.optim.min_lr, recipe.optim.warmup_steps, t.steps,
                                   recipe.optim.schedule};
  // The caching allocator's peak since the start (0 on CPU).
  auto device_mib = [&] { return static_cast<double>(util::peak_device_memory_bytes(device)) / (1 << 20); };
  auto state_bytes = [&] {  // parameters + gradients + optimizer state held by this rank
    int64_t optimizer_bytes = 0;
    for (const auto& p : parameters) optimizer_bytes += 2 * p.numel() * static_cast<int64_t>(sizeof(float));
    if (sharded) return sharded->resident_bytes() + optimizer_bytes;
    return 2 * optimizer_bytes;  // parameters and gradients, as many bytes as the two moments
  };

  if (chief) {
    fmt::print("model: {} parameters ({} layers, hidden {}, heads {}/{} kv, vocab {})\n", total_parameters,
               recipe.model.num_layers, recipe.model.hidden_size, recipe.model.num_heads, recipe.model.num_kv_heads,
               recipe.model.vocab_size);
    fmt::print("data: {} tokens, {} samples of {} tokens; unigram entropy {:.4f} nats/token\n",
               train_data->num_tokens(), train_data->num_samples(), recipe.data.seq_len, train_data->unigram_entropy());
    if (recipe.data.pack) {
      const int64_t looked_at = std::min<int64_t>(train_data->num_samples(), 1000);
      int64_t pieces = 0;
      for (int64_t g = 0; g < looked_at; ++g) pieces += data::document_piece_lengths(*train_data, g).size();
      fmt::print("packing: {:.2f} documents per sample (first {} samples){}\n",
                 static_cast<double>(pieces) / static_cast<double>(looked_at), looked_at,
                 recipe.data.balance_window > 0
                     ? fmt::format("; balancing attention cost over windows of {} steps", recipe.data.balance_window)
                     : "");
    }
    fmt::print("parallel: {}\n", mesh.describe());
    const char* wait_policy = std::getenv("OMP_WAIT_POLICY");
    fmt::print("train: {} steps x {} sequences ({} per rank: {} micro batches of {}), {} tokens/step, dtype {}, {} "
               "threads (OpenMP wait {})\n",
               t.steps, t.global_batch_size, per_rank, accumulation, t.micro_batch_size, tokens_per_step, t.dtype,
               torch::get_num_threads(), wait_policy ? wait_policy : "default");
  }

  // A sum over all ranks, so that every rank takes the same decisions.
  auto sum_over_ranks = [&](double value) {
    if (!world.distributed()) return value;
    auto total = torch::tensor({value}, torch::kFloat64).to(device);
    mesh.group("world")->all_reduce_sum(total).wait();
    return total.item<double>();
  };
  CheckpointWriter checkpoints(
      store, *mesh.group("world"), device, recipe.checkpoint.async,
      [&](int64_t at_step, const std::string& folder, double blocking_s, double write_s) {
        fmt::print("checkpoint: {}{} (written in {:.2f} s; the steps waited {:.2f} s)\n", folder,
                   sharded ? fmt::format(" ({} shards)", degrees.fsdp) : "", write_s, blocking_s);
        nlohmann::ordered_json record = {{"step", at_step}, {"checkpoint", folder}, {"checkpoint_write_s", write_s},
                                         {"checkpoint_blocking_s", blocking_s}};
        metrics->write(record);
      });
  // A checkpoint never holds non-finite weights: `latest` and the keep policy trust it.
  auto check_finite_weights = [&](int64_t at_step) {
    const double bad = sum_over_ranks(all_finite(parameters) ? 0.0 : 1.0);
    if (bad == 0) return;
    std::vector<std::pair<std::string, torch::Tensor>> named;
    for (const auto& p : optimized) named.emplace_back(p.name, p.tensor);
    const auto latest = store.latest();
    const std::string here = describe_non_finite(named);
    throw std::runtime_error(fmt::format("the weights are not finite after step {} ({}); no checkpoint was written, {}",
                                         at_step, here.empty() ? "in another rank's shard" : here,
                                         latest ? "the latest is still " + *latest : "there is none yet"));
  };
  auto save = [&](int64_t at_step) {
    check_finite_weights(at_step);
    nlohmann::json trainer_state = {
        {"step", at_step},
        {"samples_consumed", samples_consumed},
        {"tokens_seen", samples_consumed * recipe.data.seq_len},
        {"data_schedule", data_schedule},
        {"rng_cpu", to_hex(at::detail::getDefaultCPUGenerator().get_state())},
        {"xtrain_version", XTRAIN_VERSION},
        {"world_size", world.size},
        {"parallel", {{"dp", degrees.dp}, {"fsdp", degrees.fsdp}}},
    };
    if (device.is_cuda()) trainer_state["rng_cuda"] = to_hex(util::device_rng_state(device));
    if (loss_scaler) {
      trainer_state["loss_scale"] = loss_scaler->state().scale;
      trainer_state["loss_scale_finite_steps"] = loss_scaler->state().finite_steps;
    }
    const auto model_config = ckpt::hf_config(model->config(), tokenizer->eos_id());
    // In the background, the write works on a host copy of the state, taken now; synchronously
    // it reads the live tensors.
    const auto snapshot_started = Clock::now();
    auto snapshot = [&](const torch::Tensor& tensor) {
      return checkpoints.background() ? tensor.detach().to(torch::kCPU, /*non_blocking=*/false, /*copy=*/true)
                                      : tensor;
    };
    auto optimizer_state = optimizer.state();
    CheckpointWriter::WriteFiles write;
    if (!sharded) {
      ckpt::TensorMap model_state;
      for (const auto& [name, tensor] : ckpt::model_tensors(model)) model_state[name] = snapshot(tensor);
      for (auto& [name, tensor] : optimizer_state) tensor = snapshot(tensor);
      write = [model_state, optimizer_state, model_config, trainer_state, recipe_yaml, &fault,
               at_step](const std::string& folder) {
        ckpt::save_safetensors(folder + "/model.safetensors", model_state, {{"format", "pt"}});
        inject_fault_in_save(fault, at_step);
        ckpt::save_safetensors(folder + "/optimizer.safetensors", optimizer_state);
        ckpt::write_metadata_files(folder, model_config, trainer_state, recipe_yaml);
      };
    } else {
      // Every rank of the first replica writes its shard; rank 0 also the metadata.
      std::vector<ckpt::ParameterPiece> pieces;
      if (mesh.group("dp")->rank() == 0)
        for (size_t i = 0; i < optimized.size(); ++i) {
          const auto& name = optimized[i].name;
          pieces.push_back({name, piece_shape[i], piece_begin[i], snapshot(optimized[i].tensor),
                            snapshot(optimizer_state.at("exp_avg." + name)),
                            snapshot(optimizer_state.at("exp_avg_sq." + name))});
        }
      write = [pieces, rank = world.rank, writes_shard = mesh.group("dp")->rank() == 0, steps = optimizer.steps_taken(), chief,
               model_config, trainer_state, recipe_yaml, &fault, at_step](const std::string& folder) {
        if (writes_shard) ckpt::write_checkpoint_shard(folder, rank, pieces, steps);
        inject_fault_in_save(fault, at_step);
        if (chief) ckpt::write_metadata_files(folder, model_config, trainer_state, recipe_yaml);
      };
    }
    const double snapshot_s = std::chrono::duration<double>(Clock::now() - snapshot_started).count();
    checkpoints.save(at_step, std::move(write), snapshot_s);
  };
  auto run_eval = [&](int64_t at_step) {
    if (!eval_data) return;
    // Every rank evaluates the same batches: the gathers need all of them.
    if (sharded) sharded->begin_inference();
    auto result = evaluate(model, *eval_data, t.micro_batch_size, t.eval_batches, t.dtype, loss_chunk, recipe.data.pack);
    if (sharded) sharded->end_inference();
    if (!chief) return;
    fmt::print("eval step {}: loss {:.4f} | perplexity {:.3f} | {} tokens\n", at_step, result.loss,
               result.perplexity, result.tokens);
    nlohmann::ordered_json record = {{"step", at_step}, {"eval_loss", result.loss},
                                     {"eval_perplexity", result.perplexity}, {"eval_tokens", result.tokens}};
    metrics->write(record);
  };
  // In one all-reduce: the sum over ranks of `summed`, and the spread of `per_rank` (its mean,
  // its maximum and the rank that holds it).
  auto sum_and_spread = [&](double summed, double per_rank) {
    if (!world.distributed()) return std::make_pair(summed, RankSpread{per_rank, per_rank, 0});
    auto host = torch::zeros({world.size + 1}, torch::kFloat64);
    host[0] = summed;
    host[world.rank + 1] = per_rank;
    auto values = host.to(device);
    mesh.group("world")->all_reduce_sum(values).wait();
    values = values.to(torch::kCPU);
    const auto ranks = values.narrow(0, 1, world.size);
    return std::make_pair(values[0].item<double>(), RankSpread{ranks.mean().item<double>(), ranks.max().item<double>(),
                                                               ranks.argmax().item<int64_t>()});
  };

  if (step >= last_step) {
    if (chief) fmt::print("nothing to do: the checkpoint is at step {} and the run ends at step {}\n", step, last_step);
    mesh.group("world")->barrier();
    return 0;
  }
  if (t.eval_at_start && step == 0) run_eval(0);
  const int64_t first_step = step + 1;
  // A background thread reads this rank's micro batches ahead of the steps that train on them.
  const data::BatchSchedule batch_schedule(
      *train_data, t.global_batch_size,
      {recipe.data.balance_window, recipe.data.pack, static_cast<uint64_t>(recipe.run.seed)});
  // Restarted after a rollback, from the data after the spike.
  std::optional<data::BatchLoader> loader;
  auto start_loader = [&](int64_t from_step, int64_t from_position) {
    loader.reset();
    loader.emplace(
        [&, from_step, from_position](int64_t at_step) {
          const int64_t position = from_position + (at_step - from_step) * t.global_batch_size;
          const auto mine = batch_schedule.step_samples(position, data_ranks)[static_cast<size_t>(mesh.data_rank())];
          std::vector<data::MicroBatch> micro_batches;
          for (int64_t micro = 0; micro < accumulation; ++micro)
            micro_batches.push_back(data::make_micro_batch(
                *train_data,
                std::vector<int64_t>(mine.begin() + micro * t.micro_batch_size,
                                     mine.begin() + (micro + 1) * t.micro_batch_size),
                recipe.data.pack));
          return micro_batches;
        },
        from_step, last_step, recipe.data.prefetch);
  };
  start_loader(first_step, samples_consumed);
  NonFiniteGuard non_finite(t.max_skipped_steps);
  SpikeDetector spikes(t.spike_window, t.spike_zscore);
  int64_t spikes_in_a_row = 0, rollbacks_to_latest = 0;
  int64_t steps_run = 0;  // in this process, rollbacks included
  // train.spike rollback: the weights of the newest intact checkpoint, and the data from after
  // the spike step (the samples since that checkpoint are skipped). False without a checkpoint.
  auto roll_back = [&](const Spike& spike) {
    checkpoints.finish();            // a background save in flight is committed first
    mesh.group("world")->barrier();      // and seen by every rank
    const auto choice = store.newest_intact(/*strict=*/false);
    if (!choice) return false;
    const int64_t spike_step = step, data_position = samples_consumed;
    load_checkpoint_state(ckpt::CheckpointReader(choice->dir), choice->dir);
    const int64_t skipped_from = samples_consumed;
    samples_consumed = data_position;
    spikes_in_a_row = 0;
    start_loader(step + 1, samples_consumed);
    if (chief) {
      fmt::print("step {}: loss spike: {}; rolled back to {} (step {}), skipping samples {}-{} (the data of steps "
                 "{}-{})\n",
                 spike_step, spike.describe(), choice->dir, step, skipped_from, data_position - 1, step + 1,
                 spike_step);
      metrics->write({{"step", spike_step}, {"rollback_to", step}, {"skipped_samples", {skipped_from, data_position}}});
    }
    return true;
  };
  double data_wait_total = 0;
  double imbalance_sum = 0;  // over steps: the slowest rank's busy time over the mean
  double interval_seconds = 0, session_seconds = 0;
  int64_t interval_steps = 0;
  int64_t peak_state_bytes = 0;
  model->train();
  while (step < last_step) {
    const auto started = Clock::now();
    const double waited_before = parallel::PendingCollective::total_wait_seconds();
    ++step;
    ++steps_run;
    progress.step = step;
    inject_fault(fault, step);
    const double injected_loss_factor = take_injected_spike(injected_spike, step);
    const double lr = schedule.at(step);
    if (sharded)
      sharded->zero_grad();
    else
      for (auto& p : parameters) p.mutable_grad() = torch::Tensor();
    // This rank's share of the global batch (the global batches do not depend on the layout).
    const std::vector<data::MicroBatch> micro_batches = loader->next();
    const double data_wait = loader->last_wait_seconds();
    data_wait_total += data_wait;
    // Every target token of the global batch weighs the same: a micro batch's mean loss counts
    // by its share of the batch's targets (chat data leaves some samples without any).
    double local_count = 0;
    for (const auto& micro_batch : micro_batches) local_count += static_cast<double>(micro_batch.target_count);
    const double global_count = sum_over_ranks(local_count);
    const double divisor = injected_divisor(global_count);
    auto loss_sum = torch::zeros({}, scalar_options);  // over this rank's targets, read once per step
    const auto busy_started = Clock::now();
    const double waited_before_busy = parallel::PendingCollective::total_wait_seconds();
    for (int64_t micro = 0; micro < accumulation; ++micro) {
      const auto& batch = micro_batches[static_cast<size_t>(micro)];
      const auto layout =
          batch.cu_seqlens.defined() ? model::packed_layout(batch.cu_seqlens, device) : model::SequenceLayout{};
      const auto count = static_cast<double>(batch.target_count);
      if (sharded) sharded->begin_micro_batch(micro + 1 == accumulation);
      torch::Tensor loss;
      if (offloader) offloader->begin_forward();
      {
        PrecisionScope precision(t.dtype, device.type());
        loss = training_loss(model, batch.inputs.to(device, /*non_blocking=*/true),
                             batch.targets.to(device, /*non_blocking=*/true), loss_chunk, layout);
      }
      if (injected_loss_factor != 1.0) loss = loss * injected_loss_factor;
      // Gradients are averaged over the data-parallel ranks afterwards, hence the factor.
      const double share = global_count > 0 ? count * static_cast<double>(data_ranks) / divisor *
                                                  injected_micro_batch_weight(micro, accumulation)
                                            : 0.0;
      (loss * ((loss_scaler ? loss_scaler->scale() : 1.0) * share)).backward();
      if (sharded) sharded->end_micro_batch();
      loss_sum.add_(loss.detach().to(torch::kFloat64) * count);
    }
    if (!sharded) inject_gradient_fault(optimized);
    const double local_loss_sum = loss_sum.item<double>();  // waits for the device's queued work
    // This rank's forward and backward time, less what it spent blocked on its peers: a rank
    // whose share is heavier (or whose machine is slower) stands out.
    const double busy = std::chrono::duration<double>(Clock::now() - busy_started).count() -
                        (parallel::PendingCollective::total_wait_seconds() - waited_before_busy);
    const auto [global_loss_sum, busy_spread] = sum_and_spread(local_loss_sum, busy);
    imbalance_sum += busy_spread.mean > 0 ? busy_spread.max / busy_spread.mean : 1.0;
    samples_consumed += t.global_batch_size;
    const double loss_value = global_count > 0 ? global_loss_sum / global_count : 0.0;
    // fp16: a step whose gradients overflowed is skipped (no update) and the loss scale shrinks.
    const double loss_scale = loss_scaler ? loss_scaler->scale() : 1.0;
    bool finite_gradients = true;
    if (loss_scaler) finite_gradients = sum_over_ranks(loss_scaler->unscale(parameters) ? 0.0 : 1.0) == 0.0;
    double grad_norm = std::numeric_limits<double>::quiet_NaN();
    bool skipped = !finite_gradients;
    std::optional<Spike> spike;
    if (finite_gradients) {
      grad_norm = sharded ? sharded->clip_grad_norm(recipe.optim.grad_clip)
                          : optim::clip_grad_norm(parameters, recipe.optim.grad_clip);
      skipped = !non_finite.admit(step, loss_value, grad_norm);
      if (!skipped && t.spike != "off") spike = spikes.check(loss_value, grad_norm);
      if (spike) {
        skipped = true;
        ++spikes_in_a_row;
      } else if (!skipped) {
        spikes_in_a_row = 0;
        spikes.add(loss_value, grad_norm);
        optimizer.step(lr);
      }
      if (skipped && !spike && chief)
        fmt::print("step {}: loss {:.4f}, gradient norm {:.4g}: not finite; step skipped, no update ({} in a row, {} "
                   "in all)\n",
                   step, loss_value, grad_norm, non_finite.in_a_row(), non_finite.total());
    }
    if (loss_scaler) {
      loss_scaler->update(finite_gradients);
      if (!finite_gradients && chief)
        fmt::print("step {}: fp16 gradients overflowed at loss scale {:g}; step skipped, loss scale now {:g}\n", step,
                   loss_scale, loss_scaler->scale());
    }
    peak_state_bytes = std::max(peak_state_bytes, sharded ? sharded->peak_resident_bytes() + state_bytes() -
                                                                sharded->resident_bytes()
                                                          : state_bytes());
    const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
    interval_seconds += seconds;
    session_seconds += seconds;
    ++interval_steps;

    if (chief) {
      nlohmann::ordered_json record = {{"step", step},
                                       {"loss", loss_value},
                                       {"lr", lr},
                                       {"grad_norm", grad_norm},
                                       {"tokens_per_s", tokens_per_step / seconds},
                                       {"step_s", seconds},
                                       {"tokens_seen", samples_consumed * recipe.data.seq_len},
                                       {"peak_rss_mib", peak_rss_mib()},
                                       {"peak_device_mib", device_mib()},
                                       {"state_mib", static_cast<double>(peak_state_bytes) / (1 << 20)},
                                       {"comm_wait_s", parallel::PendingCollective::total_wait_seconds() - waited_before},
                                       {"data_wait_s", data_wait},
                                       {"data_read_s", loader->last_read_seconds()}};
      if (world.distributed()) {
        record["busy_s_mean"] = busy_spread.mean;
        record["busy_s_max"] = busy_spread.max;
        record["slowest_rank"] = busy_spread.argmax;
      }
      if (loss_scaler) record["loss_scale"] = loss_scale;
      record["skipped"] = skipped;
      record["skipped_total"] = non_finite.total();
      if (spike) record["spike"] = t.spike;
      metrics->write(record);
    }
    if (chief && (step % t.log_every == 0 || step == last_step || steps_run == 1)) {
      const double mean_step = session_seconds / static_cast<double>(steps_run);
      fmt::print("step {:>{}}/{} | loss {:.4f} | lr {:.2e} | grad norm {:.3f} | {} tok/s | {:.0f} MiB{} | eta {}\n",
                 step, std::to_string(t.steps).size(), t.steps, loss_value, lr, grad_norm,
                 format_rate(tokens_per_step * interval_steps / interval_seconds), peak_rss_mib(),
                 device.is_cuda() ? fmt::format(" | {:.0f} MiB on {}", device_mib(), device.str()) : "",
                 format_duration(mean_step * static_cast<double>(last_step - step)));
      std::fflush(stdout);
      interval_seconds = 0;
      interval_steps = 0;
    }
    if (non_finite.exhausted()) {
      const auto latest = store.latest();
      throw std::runtime_error(fmt::format(
          "steps {}-{}: {} steps in a row had a non-finite loss or gradient norm (train.max_skipped_steps); the "
          "run is diverging. Likely causes: optim.lr too high (now {:g}){}{}, or corrupt data in the samples of "
          "these steps. {}",
          non_finite.first_of_run(), step, non_finite.in_a_row(), recipe.optim.lr,
          recipe.optim.grad_clip > 0 ? "" : ", no gradient clipping (optim.grad_clip 0)",
          t.dtype == "fp16" ? ", fp16 overflow (bf16 has fp32's range)" : "",
          latest ? fmt::format("The last checkpoint, {}, holds finite weights from before them", *latest)
                 : "No checkpoint was written yet"));
    }
    if (spike) {
      if (t.spike == "rollback" && rollbacks_to_latest >= t.max_skipped_steps)
        throw std::runtime_error(fmt::format(
            "step {}: {}, and the run has rolled back to the same checkpoint {} time{} already (train.spike "
            "rollback, train.max_skipped_steps {}): {}",
            step, spike->describe(), rollbacks_to_latest, rollbacks_to_latest == 1 ? "" : "s", t.max_skipped_steps,
            kPersistentSpikes));
      if (t.spike == "rollback" && roll_back(*spike)) {
        ++rollbacks_to_latest;
        watchdog.step_done(step);
        continue;
      }
      if (spikes_in_a_row >= t.max_skipped_steps)
        throw std::runtime_error(fmt::format(
            "steps {}-{}: {} loss spikes in a row, the last: {} (train.spike {}, train.max_skipped_steps {}): {}",
            step - spikes_in_a_row + 1, step, spikes_in_a_row, spike->describe(), t.spike, t.max_skipped_steps,
            kPersistentSpikes));
      if (chief)
        fmt::print("step {}: loss spike: {}; step skipped, no update{}\n", step, spike->describe(),
                   t.spike == "rollback" ? " (no checkpoint to roll back to yet)" : "");
    }
    checkpoints.poll();  // commits a background save whose files every rank has written
    const bool stop_file = chief && take_stop_file(recipe.run.dir);
    if (stop_file) fmt::print("found {}/STOP after step {}: saving a checkpoint and stopping (the file is removed)\n",
                              recipe.run.dir, step);
    const bool stopping = sum_over_ranks(stop_requested() || stop_file ? 1.0 : 0.0) > 0;
    const bool periodic = recipe.checkpoint.every > 0 && step % recipe.checkpoint.every == 0;
    // While steps are being skipped, periodic checkpoints wait: the keep policy would otherwise
    // replace the checkpoints from before the trouble with copies of the same weights.
    if (periodic && (non_finite.in_a_row() > 0 || spikes_in_a_row > 0) && step != last_step && !stopping) {
      if (chief) fmt::print("step {}: checkpoint deferred while steps are being skipped\n", step);
    } else if (periodic || step == last_step || stopping) {
      save(step);
      rollbacks_to_latest = 0;
    }
    if (t.eval_every > 0 && step % t.eval_every == 0 && step != t.steps) run_eval(step);
    watchdog.step_done(step);
    if (stopping) {
      if (chief)
        fmt::print("stopped by {} after step {}; run the same command to continue (exit {})\n",
                   stop_requested() ? util::signal_name(stop_signal_number()) : "a STOP file or another rank's signal",
                   step, kExitStopped);
      checkpoints.finish();
      mesh.group("world")->barrier();
      return kExitStopped;
    }
  }
  checkpoints.finish();
  if (step == t.steps) run_eval(step);
  if (chief) {
    if (options.stop_at_step > 0 && step < t.steps)
      fmt::print("stopped at step {} of {} (--stop-at-step); run again to continue\n", step, t.steps);
    else
      fmt::print("done: {} steps\n", step);
    fmt::print("memory per rank: parameters + gradients + optimizer state {:.1f} MiB (peak, with gathered blocks)\n",
               static_cast<double>(peak_state_bytes) / (1 << 20));
    if (world.distributed())
      fmt::print("ranks: the busiest rank computed {:.1f}% longer than the mean per step (busy_s_max / busy_s_mean, "
                 "averaged over steps)\n",
                 100.0 * (imbalance_sum / static_cast<double>(steps_run) - 1.0));
    fmt::print("data: waited {:.3f} s for batches in {} steps ({:.2f}% of step time)\n", data_wait_total,
               steps_run, session_seconds > 0 ? 100.0 * data_wait_total / session_seconds : 0.0);
  }
  mesh.group("world")->barrier();
  return 0;
}

}  // namespace

int evaluate_checkpoint(const config::Recipe& recipe, const std::string& checkpoint_dir) {
  apply_threads(recipe);
  if (recipe.data.eval.empty())
    throw InputError("data.eval is empty: set it in the recipe or with --set data.eval=PATH");
  auto tokenizer = data::make_tokenizer(recipe.data.tokenizer);
  auto eval_data = load_recipe_dataset("data.eval", recipe.data.eval, *tokenizer, recipe, false);
  std::string dir = checkpoint_dir;
  std::string verification;
  if (dir.empty()) {
    auto choice =
        ckpt::CheckpointStore(recipe.run.dir, recipe.checkpoint.keep).newest_intact(recipe.checkpoint.resume == "strict");
    if (!choice)
      throw InputError(fmt::format("no checkpoint in {}/checkpoints: train first or pass --checkpoint DIR",
                                   recipe.run.dir));
    for (const auto& skipped : choice->skipped)
      fmt::print(stderr, "warning: skipping damaged checkpoint {}; evaluating {} instead\n", skipped, choice->dir);
    dir = choice->dir;
    verification = choice->check.summary();
  } else {
    verification = ckpt::verify_checkpoint(dir).summary();
  }
  auto model = ckpt::load_hf_folder(dir);
  std::vector<std::pair<std::string, torch::Tensor>> named;
  for (const auto& item : model->named_parameters()) named.emplace_back(item.key(), item.value());
  require_finite_weights(named, dir);
  auto result = evaluate(model, *eval_data, recipe.train.micro_batch_size, recipe.train.eval_batches, recipe.train.dtype,
                         0, recipe.data.pack);
  if (!std::isfinite(result.loss))
    throw std::runtime_error(fmt::format("{}: the eval loss is {} although the weights are finite; the model "
                                         "overflows on this data (try train.dtype: fp32)",
                                         dir, result.loss));
  fmt::print("checkpoint: {} ({})\neval loss {:.4f} | perplexity {:.3f} | {} tokens\n", dir, verification, result.loss,
             result.perplexity, result.tokens);
  return 0;
}

}  // namespace xtrain::train
