#include "train/trainer.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <limits>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include "ckpt/checkpoint.h"
#include "ckpt/checkpoint_reader.h"
#include "ckpt/hf_folder.h"
#include "ckpt/sharded_checkpoint.h"
#include "config/batch_geometry.h"
#include "config/option_registry.h"
#include "config/recipe_loader.h"
#include "data/batch_loader.h"
#include "data/batch_schedule.h"
#include "data/micro_batch.h"
#include "memory/memory_policy.h"
#include "model/linear.h"
#include "model/model_spec.h"
#include "model/parameter_source.h"
#include "model/sdpa_attention.h"
#include "optim/adamw.h"
#include "optim/grad_clip.h"
#include "optim/loss_scaler.h"
#include "optim/lr_schedule.h"
#include "parallel/device_mesh.h"
#include "parallel/expert_parallel.h"
#include "parallel/fully_sharded.h"
#include "parallel/pipeline_stage.h"
#include "parallel/placement.h"
#include "parallel/tensor_parallel.h"
#include "parallel/tensor_parallel_plan.h"
#include "parallel/watchdog.h"
#include "parallel/world.h"
#include "text/tokenizer.h"
#include "train/checkpoint_writer.h"
#include "train/evaluate.h"
#include "train/expert_balance.h"
#include "train/fault_injection.h"
#include "train/metrics_log.h"
#include "train/micro_batch_memory.h"
#include "train/micro_batch_weight.h"
#include "train/model_factory.h"
#include "train/non_finite_guard.h"
#include "train/pipeline_schedule.h"
#include "train/precision.h"
#include "train/recipe_data.h"
#include "train/resume_changes.h"
#include "train/resume_check.h"
#include "train/schedule.h"
#include "train/spike_detector.h"
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

// The checkpoint to continue from, verified against its manifest and found finite: checkpoint.resume auto (or
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
  if (resume != "auto" && resume != "strict") return ResumeFrom{resume, ckpt::verify_resumable(resume).summary()};
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

// Weight decay is the family's rule (its ModelSpec), for whole parameters and for shards alike.
bool decays(const model::CausalLM& model, const std::string& name, size_t dims) {
  return model::model_spec(model.config().family).decays(name, static_cast<int64_t>(dims));
}

std::vector<optim::NamedParameter> named_parameters(model::CausalLM& model) {
  std::vector<optim::NamedParameter> parameters;
  for (const auto& item : model.named_parameters())
    parameters.push_back({item.key(), item.value(), decays(model, item.key(), item.value().dim())});
  return parameters;
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
  return {m.recompute, m.recompute_ratio, m.offload_activations, attention, m.attention_block_size,
          m.vision_recompute_ratio};
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

// What one optimizer step did: for the log line, metrics.jsonl and the decisions after it.
struct StepOutcome {
  double loss = 0;
  double lr = 0;
  double grad_norm = std::numeric_limits<double>::quiet_NaN();
  double loss_scale = 1.0;
  double seconds = 0;
  double data_wait = 0;
  double comm_wait = 0;
  bool skipped = false;
  std::optional<Spike> spike;
  RankSpread busy;
  std::map<std::string, double> aux_losses;  // per target, over the global batch
  std::optional<ExpertBalanceStats> experts;  // mixtures of experts
  parallel::ExchangeWait expert_exchange_wait;  // seconds blocked on expert all-to-alls (ep > 1)
  double tensor_parallel_s = 0;                 // seconds in tensor-parallel collectives (tp > 1)
  double pipeline_idle = 0;                     // seconds waiting on pipeline neighbours (pp > 1)
  double pipeline_in_flight = 0;                // most micro batches held at once (pp > 1)
  std::vector<double> stage_idle, stage_in_flight, stage_rss;  // by pipeline stage (pp > 1)
};

// One training process from its recipe to its exit code: set-up (data, model, mesh, sharding,
// optimizer, resume), then train_step after train_step, each followed by logging, the checks
// that stop a diverging run, checkpoints and evaluation.
class TrainingRun {
 public:
  TrainingRun(const config::Recipe& recipe, const TrainOptions& options, RunProgress& progress);
  int run();

 private:
  void check_layout();
  void load_data();
  void check_micro_batch_memory() const;
  void build_model();
  void shard_model();
  void resume();
  void open_outputs();
  void print_summary() const;

  StepOutcome train_step();
  void zero_grad();
  MicroBatchLosses forward_backward(const data::MicroBatch& batch, int64_t index, int64_t count);
  ChunkOutput run_chunk(int64_t chunk, const data::MicroBatch& batch, const torch::Tensor& input, double loss_weight,
                        double loss_factor);
  ChunkOutput forward_chunk(int64_t chunk, const data::MicroBatch& batch, int64_t index, int64_t count,
                            const torch::Tensor& input);
  double micro_batch_loss_weight(const data::MicroBatch& batch, int64_t index, int64_t count) const;
  void freeze_parts();
  void report_stages(StepOutcome& outcome);
  EvalResult evaluate_pipeline();
  void update(StepOutcome& outcome);
  void log_step(const StepOutcome& outcome);
  void stop_if_diverging(const StepOutcome& outcome) const;
  bool handle_spike(const Spike& spike);
  std::optional<int> checkpoint_evaluate_or_stop();
  int finish();

  void load_checkpoint_state(const ckpt::CheckpointReader& checkpoint, const std::string& dir);
  void check_resumed_schedule(const std::string& dir) const;
  void save(int64_t at_step);
  nlohmann::json trainer_state(int64_t at_step) const;
  void check_finite_weights(int64_t at_step);
  void run_eval(int64_t at_step);
  void start_loader(int64_t from_step, int64_t from_position);
  bool roll_back(const Spike& spike);
  double sum_over_ranks(double value);
  std::pair<double, RankSpread> sum_and_spread(double summed, double per_rank);
  int64_t state_bytes() const;
  double device_mib() const { return static_cast<double>(util::peak_device_memory_bytes(device_)) / (1 << 20); }

  const config::Recipe& recipe_;
  const config::TrainSection& t_;
  const TrainOptions& options_;
  RunProgress& progress_;
  const parallel::World world_;
  const bool chief_;
  parallel::ParallelDegrees degrees_;
  int64_t data_ranks_ = 1;
  std::optional<Fault> fault_;
  std::optional<Fault> injected_spike_;  // its own copy: consumed when it fires, while a save reads fault_

  std::unique_ptr<text::Tokenizer> tokenizer_;
  std::unique_ptr<data::SampleDataset> train_data_;
  std::unique_ptr<data::SampleDataset> eval_data_;
  torch::Device device_ = torch::kCPU;
  std::unique_ptr<ckpt::CheckpointStore> store_;
  std::optional<ResumeFrom> resume_from_;
  std::shared_ptr<model::CausalLM> model_;
  InitialWeights initial_weights_;
  // The config.json the model came from (model.init_from's, or the resumed checkpoint's, which
  // carries it on): checkpoints write it back with xtrain's fields over it (ckpt/hf_config.h).
  nlohmann::json imported_hf_config_;
  int64_t total_parameters_ = 0;
  std::shared_ptr<memory::ActivationOffloader> offloader_;
  int64_t loss_chunk_ = 0;
  std::optional<parallel::DeviceMesh> mesh_;
  std::unique_ptr<parallel::Watchdog> watchdog_;
  torch::TensorOptions scalar_options_;  // where the backend sums scalars (loss, counts, flags)
  std::unique_ptr<parallel::FullyShardedModel> sharded_;
  // Pipeline parallelism (parallel.pp > 1): this rank's chunks, and the schedule that runs them.
  std::unique_ptr<parallel::PipelineStage> pipeline_;
  std::unique_ptr<PipelineSchedule> pipeline_schedule_;
  std::unique_ptr<ExpertBalance> experts_;  // the expert loads, bias and balance figures
  std::vector<optim::NamedParameter> optimized_;  // whole tensors, or this rank's pieces
  std::vector<ckpt::PieceLayout> pieces_;  // where each optimized tensor lies in its parameter
  std::vector<int64_t> piece_copies_;      // tensor-parallel ranks holding the same piece
  std::vector<bool> piece_primary_;        // false: a copy another rank checkpoints (ParameterShard::primary)
  // 1 on the ranks whose losses and target counts stand for their data rank's (tensor-parallel
  // rank 0: its peers computed the same), 0 on the others.
  double data_share_ = 1.0;
  std::vector<torch::Tensor> parameters_;          // optimized_'s tensors
  std::unique_ptr<optim::AdamW> optimizer_;
  std::optional<optim::DynamicLossScaler> loss_scaler_;
  std::unique_ptr<Schedule> schedule_;

  int64_t step_ = 0;
  int64_t samples_consumed_ = 0;
  nlohmann::json saved_schedule_;  // the data schedule of the checkpoint's run
  nlohmann::json data_schedule_;
  std::vector<std::string> resume_notices_;
  std::optional<MetricsLog> metrics_;
  std::string recipe_yaml_;
  int64_t accumulation_ = 1;
  int64_t tokens_per_step_ = 0;
  int64_t last_step_ = 0;
  optim::LrSchedule lr_schedule_;
  std::unique_ptr<CheckpointWriter> checkpoints_;
  std::unique_ptr<data::BatchSchedule> batch_schedule_;
  std::optional<data::BatchLoader> loader_;  // restarted after a rollback, from the data after the spike

  // The step being computed: its targets over all ranks, the divisor of its loss, a spike fault's factor.
  double step_targets_ = 0;
  double step_divisor_ = 0;
  double injected_loss_factor_ = 1.0;

  NonFiniteGuard non_finite_;
  SpikeDetector spikes_;
  int64_t spikes_in_a_row_ = 0, rollbacks_to_latest_ = 0;
  int64_t steps_run_ = 0;  // in this process, rollbacks included
  double data_wait_total_ = 0;
  double imbalance_sum_ = 0;  // over steps: the slowest rank's busy time over the mean
  double interval_seconds_ = 0, session_seconds_ = 0;
  int64_t interval_steps_ = 0;
  int64_t peak_state_bytes_ = 0;
};

TrainingRun::TrainingRun(const config::Recipe& recipe, const TrainOptions& options, RunProgress& progress)
    : recipe_(recipe), t_(recipe.train), options_(options), progress_(progress), world_(parallel::discover_world()),
      chief_(world_.rank == 0),
      lr_schedule_{recipe.optim.lr, recipe.optim.min_lr, recipe.optim.warmup_steps, recipe.train.steps,
                   recipe.optim.schedule},
      non_finite_(recipe.train.max_skipped_steps), spikes_(recipe.train.spike_window, recipe.train.spike_zscore) {
  apply_threads(recipe_, world_.local_size);
  check_layout();
  fault_ = planned_fault(world_.rank, world_.restart_count);
  util::numeric_fault();  // a malformed XTRAIN_NUMERIC_FAULT fails here, before any work
  injected_spike_ = fault_;
  // Everything that can fail on bad input happens before the run folder is created.
  load_data();
  device_ = util::choose_device(t_.device, world_.local_rank);
  progress_.device = device_;
  const auto backend = comm_backend(recipe_.dist.backend, device_);
  store_ = std::make_unique<ckpt::CheckpointStore>(recipe_.run.dir, recipe_.checkpoint.keep);
  resume_from_ = checkpoint_to_resume(recipe_, *store_, chief_);
  build_model();
  check_micro_batch_memory();
  mesh_ = parallel::build_mesh(world_, degrees_, recipe_.dist.timeout_s, backend, recipe_.dist.init_timeout_s);
  // Tensor-parallel rank 0 of the last pipeline stage, which computes the loss.
  data_share_ = mesh_->coordinate("tp") == 0 && mesh_->coordinate("pp") + 1 == mesh_->size("pp") ? 1.0 : 0.0;
  watchdog_ = std::make_unique<parallel::Watchdog>(mesh_->process_groups(), world_, recipe_.dist.watchdog_s);
  scalar_options_ = torch::TensorOptions().dtype(torch::kFloat64).device(device_);
  shard_model();
  if (t_.dtype == "fp16") {
    optim::LossScalerOptions scaling;
    scaling.initial_scale = recipe_.precision.loss_scale_initial;
    scaling.growth_interval = recipe_.precision.loss_scale_growth_interval;
    loss_scaler_.emplace(scaling);
  }
  schedule_ = make_schedule(1);
  if (degrees_.pp > 1)
    pipeline_schedule_ = std::make_unique<PipelineSchedule>(recipe_.parallel.pp_schedule, mesh_->group("pp"),
                                                            recipe_.parallel.pp_virtual_stages, device_);
  data_schedule_ = {{"global_batch_size", t_.global_batch_size},
                    {"balance_window", recipe_.data.balance_window},
                    {"pack", recipe_.data.pack}};
  if (resume_from_) resume();
  if (!options_.setup_only) open_outputs();
  print_summary();
}

void TrainingRun::check_layout() {
  degrees_ = parallel::resolve_degrees(
      {recipe_.parallel.dp, recipe_.parallel.fsdp, recipe_.parallel.tp, recipe_.parallel.pp, recipe_.parallel.ep},
      world_.size);
  data_ranks_ = degrees_.dp * degrees_.fsdp;
  if (auto problem = config::batch_geometry_problem(t_.global_batch_size, t_.micro_batch_size, data_ranks_))
    throw InputError("train.global_batch_size: " + *problem);
  accumulation_ = t_.global_batch_size / data_ranks_ / t_.micro_batch_size;
  if (options_.stop_at_step < 0 || options_.stop_at_step > t_.steps)
    throw InputError(
        fmt::format("--stop-at-step {} is outside 1..train.steps ({})", options_.stop_at_step, t_.steps));
  if (recipe_.parallel.pp_schedule == "interleaved_1f1b" && degrees_.pp > 1 && accumulation_ % degrees_.pp != 0)
    throw InputError(fmt::format("parallel.pp_schedule interleaved_1f1b runs micro batches in groups of pp {}: "
                                 "train.global_batch_size / (micro_batch_size x data ranks) = {} must be a multiple",
                                 degrees_.pp, accumulation_));
  tokens_per_step_ = t_.global_batch_size * recipe_.data.seq_len;
  last_step_ = options_.stop_at_step > 0 ? options_.stop_at_step : t_.steps;
}

// Before any rank joins the others: a micro batch that cannot fit is bad input, not a crash.
void TrainingRun::check_micro_batch_memory() const {
  const RankShape shape{degrees_.tp, degrees_.pp, data_ranks_, world_.local_size};
  int64_t available = util::available_memory_bytes(device_);
  std::string memory_name = "the device's free memory";
  if (!device_.is_cuda() && available >= 0) {
    memory_name = world_.local_size > 1
                      ? fmt::format("its share of the machine's available memory, which {} ranks share", world_.local_size)
                      : "the machine's available memory";
    available /= world_.local_size;
  }
  if (auto problem = micro_batch_memory_problem(recipe_, shape, available, memory_name))
    throw InputError("train.micro_batch_size: " + *problem);
}

void TrainingRun::load_data() {
  tokenizer_ = text::make_tokenizer(recipe_.data.tokenizer);
  train_data_ = load_recipe_dataset("data.train", recipe_.data.train, *tokenizer_, recipe_, recipe_.data.shuffle);
  if (!recipe_.data.eval.empty())
    eval_data_ = load_recipe_dataset("data.eval", recipe_.data.eval, *tokenizer_, recipe_, false);
}

// The model without parameter storage; shard_model() materialises what this rank keeps. A resumed
// run starts from run.seed's init, which the checkpoint then overwrites.
void TrainingRun::build_model() {
  model_ = train::build_model(recipe_);
  model::place_unmaterialized(*model_, device_);
  model::accumulate_lookup_grads_in_place(*model_);
  initial_weights_ = initial_weights(recipe_, *model_, /*fresh=*/!resume_from_);
  if (!resume_from_ && !recipe_.model.init_from.empty())
    imported_hf_config_ = ckpt::read_hf_config(recipe_.model.init_from.substr(3));
  check_numeric_fault_parameter(named_parameters(*model_));
  total_parameters_ = model_->num_parameters();
  experts_ = std::make_unique<ExpertBalance>(*model_, recipe_.model.router_bias_update_rate);
  offloader_ = memory::apply_memory_policy(*model_, memory_options(recipe_, device_));
  loss_chunk_ = loss_chunk_tokens(recipe_);
}

void TrainingRun::shard_model() {
  const auto started = Clock::now();
  if (world_.distributed()) {
    if (recipe_.model.router_aux_loss_global_average)
      model_->sum_over_data_ranks = [group = mesh_->flatten({"dp", "fsdp"})](torch::Tensor& tensor) {
        group->all_reduce_sum(tensor).wait();
      };
    std::optional<model::ShardPlan> plan;
    if (degrees_.tp > 1)
      plan = parallel::apply_tensor_parallel(*model_, *mesh_, recipe_.parallel.sequence_parallel);
    if (degrees_.ep > 1)
      plan = parallel::apply_expert_parallel(*model_, *mesh_, recipe_.parallel.intra_layer_micro_batch);
    std::vector<parallel::ParameterShard*> pieces;
    if (degrees_.pp > 1) {
      pipeline_ = std::make_unique<parallel::PipelineStage>(
          model_, plan ? std::move(*plan) : model_->shard_plan(), *mesh_, recipe_.parallel.pp_virtual_stages,
          recipe_.parallel.reshard_after_forward, initial_weights_.source);
      pieces = pipeline_->parameters();
    } else {
      sharded_ = std::make_unique<parallel::FullyShardedModel>(
          model_, *mesh_, recipe_.parallel.reshard_after_forward, initial_weights_.source, std::move(plan));
      pieces = sharded_->parameters();
    }
    for (auto* piece : pieces) {
      optimized_.push_back({piece->name, piece->local, decays(*model_, piece->name, piece->shape.size())});
      pieces_.push_back({piece->shape, piece->offsets, piece->sizes, piece->begin, piece->local.numel()});
      piece_copies_.push_back(piece->copies);
      piece_primary_.push_back(piece->primary);
    }
  } else {
    model::materialize(*model_, initial_weights_.source);
    optimized_ = named_parameters(*model_);
    for (const auto& p : optimized_) pieces_.push_back(ckpt::PieceLayout::whole(p.tensor.sizes().vec()));
  }
  freeze_parts();
  optimizer_ = std::make_unique<optim::AdamW>(
      optimized_, optim::AdamWOptions{recipe_.optim.betas[0], recipe_.optim.betas[1], recipe_.optim.eps,
                                      recipe_.optim.weight_decay});
  for (const auto& p : optimized_)
    if (!p.frozen) parameters_.push_back(p.tensor);
  const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  const auto rss = sum_and_spread(0.0, peak_rss_mib()).second;
  if (chief_ && !resume_from_)  // a resumed run says where it resumed from instead
    fmt::print("model: initial weights from {}, {} on each rank ({:.2f} s)\n", initial_weights_.description,
               sharded_ ? "its shards" : pipeline_ ? "its stage's" : "whole", seconds);
  // The state as the whole model would hold it (parameters, gradients, AdamW's two moments, fp32).
  const double whole_state_mib = static_cast<double>(total_parameters_) * 16 / (1 << 20);
  if (chief_)
    fmt::print("memory at start: peak resident {:.0f} MiB (rank {}; mean {:.0f}), this rank's state {:.0f} MiB, the "
               "whole model's state {:.0f} MiB\n",
               rss.max, rss.argmax, rss.mean, static_cast<double>(state_bytes()) / (1 << 20), whole_state_mib);
  initial_weights_ = {};  // closes the folder's files
}

void TrainingRun::resume() {
  const std::string& dir = resume_from_->dir;
  ckpt::CheckpointReader checkpoint(dir);
  check_model_unchanged(recipe_, checkpoint.recipe_yaml, dir);
  imported_hf_config_ = checkpoint.model_config;
  load_checkpoint_state(checkpoint, dir);
  check_resumed_schedule(dir);
  // After the balance checks, whose messages say more about their case.
  resume_notices_ = check_resume_changes(recipe_, checkpoint.recipe_yaml, dir,
                                         {options_.allow_changed, options_.allow_data_change});
  if (chief_) {
    fmt::print("resumed from {} at step {} ({})\n", dir, step_, resume_from_->verification);
    for (const auto& notice : resume_notices_) fmt::print("notice: changed since the checkpoint: {}\n", notice);
  }
}

// A balanced order sorts windows of balance_window x global_batch_size samples by a cost that
// depends on data.pack: continuing it needs the same three (any number of ranks will do).
void TrainingRun::check_resumed_schedule(const std::string& dir) const {
  if (recipe_.data.balance_window == 0) return;
  if (!saved_schedule_.is_null() && saved_schedule_ != data_schedule_)
    throw InputError(fmt::format(
        "{}: this run balanced its data with train.global_batch_size {}, data.balance_window {} and data.pack {}, "
        "the recipe says {}, {} and {}; the balanced sample order depends on all three, so resume with the "
        "checkpoint's values",
        dir, saved_schedule_.value("global_batch_size", 0), saved_schedule_.value("balance_window", 0),
        saved_schedule_.value("pack", false), t_.global_batch_size, recipe_.data.balance_window, recipe_.data.pack));
  if (samples_consumed_ % t_.global_batch_size != 0)
    throw InputError(fmt::format("{}: {} samples consumed is not a whole number of global batches of {}; resume "
                                 "with the checkpoint's train.global_batch_size or without data.balance_window",
                                 dir, samples_consumed_, t_.global_batch_size));
}

void TrainingRun::open_outputs() {
  clear_stop_file_at_start(recipe_.run.dir, chief_);
  if (chief_) {
    prepare_run_folder(recipe_.run.dir);
    store_->remove_stale_temp_folders();
  }
  mesh_->group("world")->barrier();
  if (chief_) metrics_.emplace(recipe_.run.dir + "/metrics.jsonl", step_);
  recipe_yaml_ = config::dump_recipe(recipe_);
  install_stop_signal_handlers(util::parse_signal_list(t_.stop_signals));
  checkpoints_ = std::make_unique<CheckpointWriter>(
      *store_, *mesh_->group("world"), device_, recipe_.checkpoint.async,
      [this](int64_t at_step, const std::string& folder, double blocking_s, double write_s) {
        fmt::print("checkpoint: {}{} (written in {:.2f} s; the steps waited {:.2f} s)\n", folder,
                   sharded_ ? fmt::format(" ({} shards)", degrees_.fsdp) : "", write_s, blocking_s);
        nlohmann::ordered_json record = {{"step", at_step}, {"checkpoint", folder}, {"checkpoint_write_s", write_s},
                                         {"checkpoint_blocking_s", blocking_s}};
        metrics_->write(record);
      });
}

void TrainingRun::print_summary() const {
  if (!chief_) return;
  const auto& m = recipe_.model;
  fmt::print("model: {} parameters ({} layers, hidden {}, heads {}/{} kv, vocab {})\n", total_parameters_,
             m.num_layers, m.hidden_size, m.num_heads, m.num_kv_heads, m.vocab_size);
  // The recipe loader let it through only with model.dropout: 0.
  if (const auto dropout = ckpt::hf_dropout(imported_hf_config_); !dropout.empty())
    fmt::print("model: trains without the dropout of its Hugging Face config ({}; model.dropout: 0); the export "
               "keeps those values\n",
               ckpt::describe(dropout));
  fmt::print("data: {} tokens, {} samples of {} tokens; unigram entropy {:.4f} nats/token\n",
             train_data_->num_tokens(), train_data_->num_samples(), recipe_.data.seq_len,
             train_data_->unigram_entropy());
  if (const auto notes = train_data_->notes(); !notes.empty()) fmt::print("data: {}\n", notes);
  if (recipe_.data.pack) {
    const int64_t looked_at = std::min<int64_t>(train_data_->num_samples(), 1000);
    int64_t pieces = 0;
    for (int64_t g = 0; g < looked_at; ++g) pieces += data::document_piece_lengths(*train_data_, g).size();
    fmt::print("packing: {:.2f} documents per sample (first {} samples){}\n",
               static_cast<double>(pieces) / static_cast<double>(looked_at), looked_at,
               recipe_.data.balance_window > 0
                   ? fmt::format("; balancing attention cost over windows of {} steps", recipe_.data.balance_window)
                   : "");
  }
  fmt::print("parallel: {}{}\n", mesh_->describe(),
             recipe_.parallel.sequence_parallel ? " with sequence parallelism" : "");
  if (world_.size > world_.local_size) {  // more than one node: say where each group falls
    fmt::print("{}\n", parallel::describe_placement(degrees_, world_.size, world_.local_size));
    if (const auto warning = parallel::placement_warning(degrees_, world_.size, world_.local_size))
      fmt::print(stderr, "warning: {}\n", *warning);
    // Which interface carries the traffic between nodes: a wrong pick (a management network,
    // loopback) shows here rather than as a hang or a slow step.
    if (const auto* groups = mesh_->process_groups(); groups != nullptr && !groups->network().empty())
      fmt::print("network: {}\n", groups->network());
  }
  const char* wait_policy = std::getenv("OMP_WAIT_POLICY");
  fmt::print("train: {} steps x {} sequences ({} per rank: {} micro batches of {}), {} tokens/step, dtype {}, {} "
             "threads (OpenMP wait {})\n",
             t_.steps, t_.global_batch_size, t_.global_batch_size / data_ranks_, accumulation_, t_.micro_batch_size,
             tokens_per_step_, t_.dtype, torch::get_num_threads(), wait_policy ? wait_policy : "default");
  if (const auto warning = lr_schedule_.warmup_warning(); !warning.empty()) fmt::print("warning: {}\n", warning);
}

// model.freeze: the frozen parts' parameters take no gradient (autograd skips them) and the
// optimizer neither updates them nor keeps state for them.
void TrainingRun::freeze_parts() {
  const auto prefixes = frozen_prefixes(recipe_);
  // Also frozen: what the model itself marks as taking no gradient (llava's unused tower layers).
  std::set<std::string> fixed;
  for (auto& item : model_->named_parameters()) {
    if (has_prefix(item.key(), prefixes)) item.value().requires_grad_(false);
    if (!item.value().requires_grad()) fixed.insert(item.key());
  }
  int64_t frozen = 0;
  std::set<std::string> counted;  // a parameter's shards and pieces count once, by its whole shape
  for (size_t i = 0; i < optimized_.size(); ++i) {
    auto& p = optimized_[i];
    p.frozen = fixed.count(p.name) > 0;
    if (!has_prefix(p.name, prefixes) || !counted.insert(p.name).second) continue;
    int64_t numel = 1;
    for (int64_t size : pieces_[i].shape) numel *= size;
    frozen += numel;
  }
  if (chief_ && !prefixes.empty())
    fmt::print("model: frozen {} ({} parameters); {} train\n", fmt::join(recipe_.model.freeze, ", "), frozen,
               total_parameters_ - frozen);
}

// Weights, optimizer state, step, data position and RNG from a checkpoint: at the start of a
// resumed run, and when train.spike rolls back.
void TrainingRun::load_checkpoint_state(const ckpt::CheckpointReader& checkpoint, const std::string& dir) {
  torch::NoGradGuard no_grad;
  std::map<std::string, torch::Tensor> optimizer_state;
  for (size_t i = 0; i < optimized_.size(); ++i) {
    const auto& name = optimized_[i].name;
    const auto& tensor = optimized_[i].tensor;
    auto read = [&](const std::string& kind) {
      return checkpoint.read(kind, name, pieces_[i]).view(tensor.sizes());
    };
    if (checkpoint.shape(name) != pieces_[i].shape)
      throw InputError(fmt::format("{}: '{}' has shape {}, the model needs {}", dir, name,
                                   fmt::join(checkpoint.shape(name), "x"), fmt::join(pieces_[i].shape, "x")));
    tensor.copy_(read("model"));
    optimizer_state["exp_avg." + name] = read("exp_avg");
    optimizer_state["exp_avg_sq." + name] = read("exp_avg_sq");
  }
  optimizer_state["step"] = torch::tensor(checkpoint.optimizer_step(), torch::kInt64);
  optimizer_->load_state(optimizer_state);
  const auto& state = checkpoint.trainer_state;
  try {
    step_ = state.at("step").get<int64_t>();
    samples_consumed_ = state.at("samples_consumed").get<int64_t>();
    at::Generator generator = at::detail::getDefaultCPUGenerator();  // a handle to the global one
    generator.set_state(from_hex(state.at("rng_cpu").get<std::string>()));
    if (device_.is_cuda() && state.contains("rng_cuda"))
      util::set_device_rng_state(device_, from_hex(state.at("rng_cuda").get<std::string>()));
    if (state.contains("data_schedule")) saved_schedule_ = state.at("data_schedule");
    experts_->load_state(state.value("expert_bias", nlohmann::json::object()), dir + "/trainer_state.json");
    if (loss_scaler_ && state.contains("loss_scale"))
      loss_scaler_->load_state({state.at("loss_scale").get<double>(), state.at("loss_scale_finite_steps").get<int64_t>()});
  } catch (const std::exception& e) {  // missing field, wrong type, corrupt RNG state
    throw InputError(fmt::format("{}/trainer_state.json: {}", dir, e.what()));
  }
}

int TrainingRun::run() {
  if (options_.setup_only) {
    if (chief_) fmt::print("set up; --setup-only: no training, nothing written\n");
    mesh_->group("world")->barrier();
    return 0;
  }
  if (step_ >= last_step_) {
    if (chief_) fmt::print("nothing to do: the checkpoint is at step {} and the run ends at step {}\n", step_, last_step_);
    mesh_->group("world")->barrier();
    return 0;
  }
  if (t_.eval_at_start && step_ == 0) run_eval(0);
  if (recipe_.checkpoint.at_start && step_ == 0) save(0);
  batch_schedule_ = std::make_unique<data::BatchSchedule>(
      *train_data_, t_.global_batch_size,
      data::BalanceOptions{recipe_.data.balance_window, recipe_.data.pack, static_cast<uint64_t>(recipe_.run.seed)});
  start_loader(step_ + 1, samples_consumed_);
  model_->train();
  while (step_ < last_step_) {
    const StepOutcome outcome = train_step();
    log_step(outcome);
    stop_if_diverging(outcome);
    if (outcome.spike && handle_spike(*outcome.spike)) continue;  // rolled back
    if (auto exit_code = checkpoint_evaluate_or_stop()) return *exit_code;
  }
  return finish();
}

// This rank's share of the global batch (the global batches do not depend on the layout),
// through the schedule, then the update.
StepOutcome TrainingRun::train_step() {
  StepOutcome outcome;
  const auto started = Clock::now();
  const double waited_before = parallel::PendingCollective::total_wait_seconds();
  const parallel::ExchangeWait exchange_waited_before = parallel::expert_exchange_wait();
  const double tensor_parallel_before = parallel::tensor_parallel_clock().seconds();
  ++step_;
  ++steps_run_;
  progress_.step = step_;
  inject_fault(fault_, step_);
  injected_loss_factor_ = take_injected_spike(injected_spike_, step_);
  outcome.lr = lr_schedule_.at(step_);
  zero_grad();
  const std::vector<data::MicroBatch> micro_batches = loader_->next();
  outcome.data_wait = loader_->last_wait_seconds();
  data_wait_total_ += outcome.data_wait;
  step_targets_ = sum_over_ranks(local_target_count(micro_batches, data_share_));
  step_divisor_ = injected_divisor(step_targets_);
  const auto busy_started = Clock::now();
  const double waited_before_busy = parallel::PendingCollective::total_wait_seconds();
  MicroBatchLosses losses;
  if (pipeline_) {
    losses = pipeline_schedule_->run(micro_batches, [this](int64_t chunk, const data::MicroBatch& batch, int64_t index,
                                                          int64_t count, const torch::Tensor& input) {
      return forward_chunk(chunk, batch, index, count, input);
    });
    pipeline_->reduce_gradients();
    outcome.pipeline_idle = pipeline_schedule_->last_idle_seconds();
    outcome.pipeline_in_flight = static_cast<double>(pipeline_schedule_->last_peak_in_flight());
  } else {
    losses = schedule_->run(micro_batches, [this](const data::MicroBatch& batch, int64_t index, int64_t count) {
      return forward_backward(batch, index, count);
    });
  }
  if (!sharded_ && !pipeline_) inject_gradient_fault(optimized_);
  // Reading the sum waits for the device's queued work; a pipeline's other stages have none.
  const double local_loss_sum = losses.loss_sum.defined() ? losses.loss_sum.item<double>() : 0.0;
  // This rank's forward and backward time, less what it spent blocked on its peers: a rank
  // whose share is heavier (or whose machine is slower) stands out.
  const double busy = std::chrono::duration<double>(Clock::now() - busy_started).count() -
                      (parallel::PendingCollective::total_wait_seconds() - waited_before_busy);
  const auto [global_loss_sum, busy_spread] = sum_and_spread(local_loss_sum * data_share_, busy);
  imbalance_sum_ += busy_spread.mean > 0 ? busy_spread.max / busy_spread.mean : 1.0;
  samples_consumed_ += t_.global_batch_size;
  outcome.loss = step_targets_ > 0 ? global_loss_sum / step_targets_ : 0.0;
  outcome.busy = busy_spread;
  for (const auto& [name, value] : losses.aux_losses)
    outcome.aux_losses[name] =
        step_targets_ > 0 ? sum_over_ranks(value.item<double>() * data_share_) / step_targets_ : 0.0;
  if (experts_->active() && losses.expert_load.defined())
    outcome.experts = experts_->finish_step(losses.expert_load, losses.dropped, *mesh_->flatten({"dp", "fsdp"}));
  update(outcome);
  peak_state_bytes_ = std::max(peak_state_bytes_, sharded_ ? sharded_->peak_resident_bytes() + state_bytes() -
                                                                 sharded_->resident_bytes()
                                                           : state_bytes());
  outcome.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  if (pipeline_) report_stages(outcome);
  outcome.comm_wait = parallel::PendingCollective::total_wait_seconds() - waited_before;
  outcome.tensor_parallel_s = parallel::tensor_parallel_clock().seconds() - tensor_parallel_before;
  const parallel::ExchangeWait exchange_waited = parallel::expert_exchange_wait();
  outcome.expert_exchange_wait = {exchange_waited.forward - exchange_waited_before.forward,
                                  exchange_waited.backward - exchange_waited_before.backward};
  interval_seconds_ += outcome.seconds;
  session_seconds_ += outcome.seconds;
  ++interval_steps_;
  return outcome;
}

void TrainingRun::zero_grad() {
  if (sharded_)
    sharded_->zero_grad();
  else if (pipeline_)
    pipeline_->zero_grad();
  else
    for (auto& p : parameters_) p.mutable_grad() = torch::Tensor();
}

// The weighting of train/micro_batch_weight.h; the divisor is the step's global target count
// unless a numeric fault changes it, and a fault may drop the step's last micro batch.
double TrainingRun::micro_batch_loss_weight(const data::MicroBatch& batch, int64_t index, int64_t count) const {
  const double loss_scale = loss_scaler_ ? loss_scaler_->scale() : 1.0;
  return train::micro_batch_loss_weight(batch.target_count, step_divisor_, loss_scale) *
         injected_micro_batch_weight(index, count);
}

MicroBatchLosses TrainingRun::forward_backward(const data::MicroBatch& batch, int64_t index, int64_t count) {
  const auto targets = static_cast<double>(batch.target_count);
  if (index == 1) inject_fault_mid_step(fault_, step_);
  const double loss_weight = micro_batch_loss_weight(batch, index, count);
  if (sharded_) sharded_->begin_micro_batch(index + 1 == count);
  BatchLoss output;
  if (offloader_) offloader_->begin_forward();
  {
    PrecisionScope precision(t_.dtype, device_.type());
    auto model_input = model_batch(batch, device_);
    // Auxiliary losses weigh as the loss does, so that their gradient does not depend on the
    // layout; the model applies it inside its blocks' backward (model/aux_loss.h).
    model_input.loss_weight = loss_weight;
    output = training_loss(*model_, model_input, loss_chunk_,
                           sharded_ && sharded_->fresh_head_gradients() ? memory::WeightGrad::into_fresh_grad
                                                                         : memory::WeightGrad::into_existing_grad);
  }
  auto loss = output.loss;
  if (injected_loss_factor_ != 1.0) loss = loss * injected_loss_factor_;
  MicroBatchLosses losses{loss.detach().to(torch::kFloat64) * targets, {}, output.expert_load, output.dropped};
  for (const auto& [name, aux] : output.aux_losses)
    losses.aux_losses[name] = aux.detach().to(torch::kFloat64) * targets;
  (loss * loss_weight).backward();
  if (sharded_) sharded_->end_micro_batch();
  return losses;
}

// A pipeline chunk's forward (train/pipeline_schedule.h): the activation for the next chunk, or
// on the model's last chunk the weighted loss that the schedule differentiates.
ChunkOutput TrainingRun::forward_chunk(int64_t chunk, const data::MicroBatch& batch, int64_t index, int64_t count,
                                       const torch::Tensor& input) {
  if (index == 1) inject_fault_mid_step(fault_, step_);
  return run_chunk(chunk, batch, input, micro_batch_loss_weight(batch, index, count), injected_loss_factor_);
}

// Chunk `chunk`'s layers on `input` and, on the model's last chunk, the micro batch's mean loss
// (times loss_factor, an injected spike) times loss_weight, and its loss sum to report.
ChunkOutput TrainingRun::run_chunk(int64_t chunk, const data::MicroBatch& batch, const torch::Tensor& input,
                                   double loss_weight, double loss_factor) {
  const auto& part = pipeline_->chunks()[static_cast<size_t>(chunk)];
  PrecisionScope precision(t_.dtype, device_.type());
  auto model_input = model_batch(batch, device_);
  model_input.loss_weight = loss_weight;
  MicroBatchLosses losses;
  auto output = pipeline_->run_chunk(chunk, input, [&](const torch::Tensor& x) {
    auto hidden = model_->forward_chunk(model_input, x, part.first_layer, part.last_layer, part.embedding, part.head);
    if (!part.head) return hidden;
    auto loss = next_token_loss_of_hidden(*model_, hidden, model_input.labels, loss_chunk_);
    if (loss_factor != 1.0) loss = loss * loss_factor;
    losses.loss_sum = loss.detach().to(torch::kFloat64) * static_cast<double>(batch.target_count);
    return loss * loss_weight;
  });
  return {output, losses};
}

// fp16: a step whose gradients overflowed is skipped (no update) and the loss scale shrinks;
// a non-finite loss or gradient norm, or a loss spike, skips the step too.
void TrainingRun::update(StepOutcome& outcome) {
  outcome.loss_scale = loss_scaler_ ? loss_scaler_->scale() : 1.0;
  bool finite_gradients = true;
  if (loss_scaler_) finite_gradients = sum_over_ranks(loss_scaler_->unscale(parameters_) ? 0.0 : 1.0) == 0.0;
  outcome.skipped = !finite_gradients;
  if (finite_gradients) {
    outcome.grad_norm = sharded_    ? sharded_->clip_grad_norm(recipe_.optim.grad_clip)
                        : pipeline_ ? pipeline_->clip_grad_norm(recipe_.optim.grad_clip)
                                 : optim::clip_grad_norm(parameters_, recipe_.optim.grad_clip);
    outcome.skipped = !non_finite_.admit(step_, outcome.loss, outcome.grad_norm);
    if (!outcome.skipped && t_.spike != "off") outcome.spike = spikes_.check(outcome.loss, outcome.grad_norm);
    if (outcome.spike) {
      outcome.skipped = true;
      ++spikes_in_a_row_;
    } else if (!outcome.skipped) {
      spikes_in_a_row_ = 0;
      spikes_.add(outcome.loss, outcome.grad_norm);
      optimizer_->step(outcome.lr);
    }
    if (outcome.skipped && !outcome.spike && chief_)
      fmt::print("step {}: loss {:.4f}, gradient norm {:.4g}: not finite; step skipped, no update ({} in a row, {} "
                 "in all)\n",
                 step_, outcome.loss, outcome.grad_norm, non_finite_.in_a_row(), non_finite_.total());
  }
  if (loss_scaler_) {
    loss_scaler_->update(finite_gradients);
    if (!finite_gradients && chief_)
      fmt::print("step {}: fp16 gradients overflowed at loss scale {:g}; step skipped, loss scale now {:g}\n", step_,
                 outcome.loss_scale, loss_scaler_->scale());
  }
}

void TrainingRun::log_step(const StepOutcome& outcome) {
  if (!chief_) return;
  nlohmann::ordered_json record = {{"step", step_},
                                   {"loss", outcome.loss},
                                   {"lr", outcome.lr},
                                   {"grad_norm", outcome.grad_norm},
                                   {"tokens_per_s", tokens_per_step_ / outcome.seconds},
                                   {"step_s", outcome.seconds},
                                   {"tokens_seen", samples_consumed_ * recipe_.data.seq_len},
                                   {"peak_rss_mib", peak_rss_mib()},
                                   {"peak_device_mib", device_mib()},
                                   {"state_mib", static_cast<double>(peak_state_bytes_) / (1 << 20)},
                                   {"comm_wait_s", outcome.comm_wait},
                                   {"data_wait_s", outcome.data_wait},
                                   {"data_read_s", loader_->last_read_seconds()}};
  for (const auto& [name, value] : outcome.aux_losses) record["aux_loss." + name] = value;
  if (degrees_.tp > 1) record["tp.collective_s"] = outcome.tensor_parallel_s;
  if (degrees_.pp > 1) {
    record["pp.bubble_s"] = outcome.pipeline_idle;
    record["pp.bubble_fraction"] = outcome.seconds > 0 ? outcome.pipeline_idle / outcome.seconds : 0.0;
    record["pp.idle_s_by_stage"] = outcome.stage_idle;
    record["pp.in_flight_by_stage"] = outcome.stage_in_flight;
    record["pp.peak_rss_mib_by_stage"] = outcome.stage_rss;
  }
  if (const auto& experts = outcome.experts) {
    record["moe.load_ratio"] = experts->load_ratio;
    record["moe.worst_layer"] = experts->worst_layer;
    record["moe.worst_load_ratio"] = experts->worst_ratio;
    record["moe.dropped_fraction"] = experts->dropped_fraction;
    if (degrees_.ep > 1) {
      record["moe.all_to_all_wait_s"] = outcome.expert_exchange_wait.forward;
      record["moe.all_to_all_backward_wait_s"] = outcome.expert_exchange_wait.backward;
    }
    if (recipe_.model.router == "sigmoid_bias") {
      record["moe.bias_min"] = experts->bias_min;
      record["moe.bias_max"] = experts->bias_max;
    }
  }
  if (world_.distributed()) {
    record["busy_s_mean"] = outcome.busy.mean;
    record["busy_s_max"] = outcome.busy.max;
    record["slowest_rank"] = outcome.busy.argmax;
  }
  if (loss_scaler_) record["loss_scale"] = outcome.loss_scale;
  record["skipped"] = outcome.skipped;
  record["skipped_total"] = non_finite_.total();
  if (outcome.spike) record["spike"] = t_.spike;
  metrics_->write(record);
  if (step_ % t_.log_every != 0 && step_ != last_step_ && steps_run_ != 1) return;
  std::string aux;
  for (const auto& [name, value] : outcome.aux_losses) aux += fmt::format(" | {} {:.4f}", name, value);
  if (const auto& experts = outcome.experts) {
    aux += fmt::format(" | experts max/mean {:.2f} (layer {})", experts->worst_ratio, experts->worst_layer);
    if (recipe_.model.capacity_factor > 0) aux += fmt::format(", dropped {:.1f}%", 100 * experts->dropped_fraction);
  }
  const double mean_step = session_seconds_ / static_cast<double>(steps_run_);
  fmt::print("step {:>{}}/{} | loss {:.4f}{} | lr {:.2e} | grad norm {:.3f} | {} tok/s | {:.0f} MiB{} | eta {}\n",
             step_, std::to_string(t_.steps).size(), t_.steps, outcome.loss, aux, outcome.lr, outcome.grad_norm,
             format_rate(tokens_per_step_ * interval_steps_ / interval_seconds_), peak_rss_mib(),
             device_.is_cuda() ? fmt::format(" | {:.0f} MiB on {}", device_mib(), device_.str()) : "",
             format_duration(mean_step * static_cast<double>(last_step_ - step_)));
  std::fflush(stdout);
  interval_seconds_ = 0;
  interval_steps_ = 0;
}

void TrainingRun::stop_if_diverging(const StepOutcome& outcome) const {
  if (non_finite_.exhausted()) {
    throw std::runtime_error(fmt::format(
        "steps {}-{}: {} steps in a row had a non-finite loss or gradient norm (train.max_skipped_steps); the "
        "run is diverging. Likely causes: optim.lr too high (now {:g}){}{}, or corrupt data in the samples of "
        "these steps. {}",
        non_finite_.first_of_run(), step_, non_finite_.in_a_row(), recipe_.optim.lr,
        recipe_.optim.grad_clip > 0 ? "" : ", no gradient clipping (optim.grad_clip 0)",
        t_.dtype == "fp16" ? ", fp16 overflow (bf16 has fp32's range)" : "",
        newest_finite_checkpoint_note(*store_)));
  }
  if (outcome.spike && t_.spike == "rollback" && rollbacks_to_latest_ >= t_.max_skipped_steps)
    throw std::runtime_error(fmt::format(
        "step {}: {}, and the run has rolled back to the same checkpoint {} time{} already (train.spike "
        "rollback, train.max_skipped_steps {}): {}",
        step_, outcome.spike->describe(), rollbacks_to_latest_, rollbacks_to_latest_ == 1 ? "" : "s",
        t_.max_skipped_steps, kPersistentSpikes));
}

// True when the run rolled back to its last checkpoint; otherwise the step stays skipped.
bool TrainingRun::handle_spike(const Spike& spike) {
  if (t_.spike == "rollback" && roll_back(spike)) {
    ++rollbacks_to_latest_;
    watchdog_->step_done(step_);
    return true;
  }
  if (spikes_in_a_row_ >= t_.max_skipped_steps)
    throw std::runtime_error(fmt::format(
        "steps {}-{}: {} loss spikes in a row, the last: {} (train.spike {}, train.max_skipped_steps {}): {}",
        step_ - spikes_in_a_row_ + 1, step_, spikes_in_a_row_, spike.describe(), t_.spike, t_.max_skipped_steps,
        kPersistentSpikes));
  if (chief_)
    fmt::print("step {}: loss spike: {}; step skipped, no update{}\n", step_, spike.describe(),
               t_.spike == "rollback" ? " (no checkpoint to roll back to yet)" : "");
  return false;
}

// After a step: commit a finished background save, write the checkpoints that are due,
// evaluate, and stop on a signal or a STOP file (the exit code), every rank at the same step.
std::optional<int> TrainingRun::checkpoint_evaluate_or_stop() {
  checkpoints_->poll();
  const StopFile stop_file = chief_ ? inspect_stop_file(recipe_.run.dir) : StopFile::none;
  if (stop_file == StopFile::regular && take_stop_file(recipe_.run.dir))
    fmt::print("found {}/STOP after step {}: saving a checkpoint and stopping (the file is removed)\n",
               recipe_.run.dir, step_);
  const double stop_votes = sum_over_ranks(stop_vote(stop_file));
  const bool stopping = stop_votes > 0;
  const bool periodic = recipe_.checkpoint.every > 0 && step_ % recipe_.checkpoint.every == 0;
  // While steps are being skipped, periodic checkpoints wait: the keep policy would otherwise
  // replace the checkpoints from before the trouble with copies of the same weights.
  if (periodic && (non_finite_.in_a_row() > 0 || spikes_in_a_row_ > 0) && step_ != last_step_ && !stopping) {
    if (chief_) fmt::print("step {}: checkpoint deferred while steps are being skipped\n", step_);
  } else if (periodic || step_ == last_step_ || stopping) {
    save(step_);
    rollbacks_to_latest_ = 0;
  }
  if (t_.eval_every > 0 && step_ % t_.eval_every == 0 && step_ != t_.steps) run_eval(step_);
  watchdog_->step_done(step_);
  if (!stopping) return std::nullopt;
  checkpoints_->finish();
  mesh_->group("world")->barrier();
  note_stop_checkpoint_saved();
  if (stop_votes >= kRefusedStopFileVote)  // saved first: the steps so far are kept
    throw InputError(fmt::format("{} (stopped after saving step {})", not_a_stop_file_message(recipe_.run.dir), step_));
  if (chief_)
    fmt::print("stopped by {} after step {}; run the same command to continue (exit {})\n",
               stop_requested() ? util::signal_name(stop_signal_number()) : "a STOP file or another rank's signal",
               step_, kExitStopped);
  return kExitStopped;
}

int TrainingRun::finish() {
  checkpoints_->finish();
  if (step_ == t_.steps) run_eval(step_);
  if (chief_) {
    if (options_.stop_at_step > 0 && step_ < t_.steps)
      fmt::print("stopped at step {} of {} (--stop-at-step); run again to continue\n", step_, t_.steps);
    else
      fmt::print("done: {} steps\n", step_);
    fmt::print("memory per rank: parameters + gradients + optimizer state {:.1f} MiB (peak, with gathered blocks)\n",
               static_cast<double>(peak_state_bytes_) / (1 << 20));
    if (world_.distributed())
      fmt::print("ranks: the busiest rank computed {:.1f}% longer than the mean per step (busy_s_max / busy_s_mean, "
                 "averaged over steps)\n",
                 100.0 * (imbalance_sum_ / static_cast<double>(steps_run_) - 1.0));
    fmt::print("data: waited {:.3f} s for batches in {} steps ({:.2f}% of step time)\n", data_wait_total_, steps_run_,
               session_seconds_ > 0 ? 100.0 * data_wait_total_ / session_seconds_ : 0.0);
  }
  mesh_->group("world")->barrier();
  return 0;
}

// Each pipeline stage's idle time, most micro batches in flight and peak resident memory (of its
// first tp and data rank), for the step's metrics: one all-reduce.
void TrainingRun::report_stages(StepOutcome& outcome) {
  const int64_t stages = degrees_.pp;
  auto values = torch::zeros({3 * stages}, torch::kFloat64);
  if (mesh_->coordinate("tp") == 0 && mesh_->data_rank() == 0) {
    const int64_t stage = mesh_->coordinate("pp");
    values[stage] = outcome.pipeline_idle;
    values[stages + stage] = outcome.pipeline_in_flight;
    values[2 * stages + stage] = peak_rss_mib();
  }
  auto on_device = values.to(device_);
  mesh_->group("world")->all_reduce_sum(on_device).wait();
  values = on_device.to(torch::kCPU);
  const auto* v = values.data_ptr<double>();
  outcome.stage_idle.assign(v, v + stages);
  outcome.stage_in_flight.assign(v + stages, v + 2 * stages);
  outcome.stage_rss.assign(v + 2 * stages, v + 3 * stages);
}

// A sum over all ranks, so that every rank takes the same decisions.
double TrainingRun::sum_over_ranks(double value) {
  if (!world_.distributed()) return value;
  auto total = torch::tensor({value}, torch::kFloat64).to(device_);
  mesh_->group("world")->all_reduce_sum(total).wait();
  return total.item<double>();
}

// In one all-reduce: the sum over ranks of `summed`, and the spread of `per_rank` (its mean,
// its maximum and the rank that holds it).
std::pair<double, RankSpread> TrainingRun::sum_and_spread(double summed, double per_rank) {
  if (!world_.distributed()) return {summed, RankSpread{per_rank, per_rank, 0}};
  auto host = torch::zeros({world_.size + 1}, torch::kFloat64);
  host[0] = summed;
  host[world_.rank + 1] = per_rank;
  auto values = host.to(device_);
  mesh_->group("world")->all_reduce_sum(values).wait();
  values = values.to(torch::kCPU);
  const auto ranks = values.narrow(0, 1, world_.size);
  return {values[0].item<double>(),
          RankSpread{ranks.mean().item<double>(), ranks.max().item<double>(), ranks.argmax().item<int64_t>()}};
}

// Parameters + gradients + optimizer state held by this rank.
int64_t TrainingRun::state_bytes() const {
  int64_t optimizer_bytes = 0;
  for (const auto& p : parameters_) optimizer_bytes += 2 * p.numel() * static_cast<int64_t>(sizeof(float));
  if (sharded_) return sharded_->resident_bytes() + optimizer_bytes;
  if (pipeline_) return pipeline_->resident_bytes() + optimizer_bytes;
  return 2 * optimizer_bytes;  // parameters and gradients, as many bytes as the two moments
}

// A checkpoint never holds non-finite weights: `latest` and the keep policy trust it.
void TrainingRun::check_finite_weights(int64_t at_step) {
  const double bad = sum_over_ranks(all_finite(parameters_) ? 0.0 : 1.0);
  if (bad == 0) return;
  std::vector<std::pair<std::string, torch::Tensor>> named;
  for (const auto& p : optimized_) named.emplace_back(p.name, p.tensor);
  const auto latest = store_->latest();
  const std::string here = describe_non_finite(named);
  throw std::runtime_error(fmt::format("the weights are not finite after step {} ({}); no checkpoint was written, {}",
                                       at_step, here.empty() ? "in another rank's shard" : here,
                                       latest ? "the latest is still " + *latest : "there is none yet"));
}

nlohmann::json TrainingRun::trainer_state(int64_t at_step) const {
  nlohmann::json state = {
      {"step", at_step},
      {"samples_consumed", samples_consumed_},
      {"tokens_seen", samples_consumed_ * recipe_.data.seq_len},
      {"data_schedule", data_schedule_},
      {"rng_cpu", to_hex(at::detail::getDefaultCPUGenerator().get_state())},
      {"xtrain_version", XTRAIN_VERSION},
      {"world_size", world_.size},
      {"parallel",
       {{"dp", degrees_.dp}, {"fsdp", degrees_.fsdp}, {"tp", degrees_.tp}, {"ep", degrees_.ep},
        {"sequence_parallel", recipe_.parallel.sequence_parallel}}},
  };
  if (device_.is_cuda()) state["rng_cuda"] = to_hex(util::device_rng_state(device_));
  if (auto biases = experts_->state(); !biases.empty()) state["expert_bias"] = std::move(biases);
  if (loss_scaler_) {
    state["loss_scale"] = loss_scaler_->state().scale;
    state["loss_scale_finite_steps"] = loss_scaler_->state().finite_steps;
  }
  return state;
}

void TrainingRun::save(int64_t at_step) {
  check_finite_weights(at_step);
  const auto state = trainer_state(at_step);
  const auto model_config = ckpt::hf_config(model_->config(), tokenizer_->eos_id(), imported_hf_config_);
  // In the background, the write works on a host copy of the state, taken now; synchronously
  // it reads the live tensors.
  const auto snapshot_started = Clock::now();
  auto snapshot = [&](const torch::Tensor& tensor) {
    return checkpoints_->background() ? tensor.detach().to(torch::kCPU, /*non_blocking=*/false, /*copy=*/true)
                                      : tensor;
  };
  auto optimizer_state = optimizer_->state();
  CheckpointWriter::WriteFiles write;
  const std::string& recipe_yaml = recipe_yaml_;
  if (!sharded_ && !pipeline_) {
    ckpt::TensorMap model_state;
    for (const auto& [name, tensor] : ckpt::model_tensors(*model_)) model_state[name] = snapshot(tensor);
    for (auto& [name, tensor] : optimizer_state) tensor = snapshot(tensor);
    write = [model_state, optimizer_state, model_config, state, recipe_yaml, &fault = fault_,
             at_step](const std::string& folder) {
      ckpt::save_safetensors(folder + "/model.safetensors", model_state, {{"format", "pt"}});
      inject_fault_in_save(fault, at_step);
      ckpt::save_safetensors(folder + "/optimizer.safetensors", optimizer_state);
      ckpt::write_metadata_files(folder, model_config, state, recipe_yaml);
    };
  } else {
    // Every rank of the first replica writes its shard, a piece that tensor-parallel ranks share
    // only from tp rank 0, a tied table only from the first pipeline stage; rank 0 also writes
    // the metadata.
    const bool writes_shard = mesh_->group("dp")->rank() == 0;
    std::vector<ckpt::ParameterPiece> pieces;
    if (writes_shard)
      for (size_t i = 0; i < optimized_.size(); ++i) {
        if (!piece_primary_[i] || (piece_copies_[i] > 1 && mesh_->coordinate("tp") != 0)) continue;
        const auto& name = optimized_[i].name;
        pieces.push_back({name, pieces_[i], snapshot(optimized_[i].tensor),
                          snapshot(optimizer_state.at("exp_avg." + name)),
                          snapshot(optimizer_state.at("exp_avg_sq." + name))});
      }
    write = [pieces, rank = world_.rank, writes_shard, steps = optimizer_->steps_taken(), chief = chief_, model_config,
             state, recipe_yaml, &fault = fault_, at_step](const std::string& folder) {
      if (writes_shard) ckpt::write_checkpoint_shard(folder, rank, pieces, steps);
      inject_fault_in_save(fault, at_step);
      if (chief) ckpt::write_metadata_files(folder, model_config, state, recipe_yaml);
    };
  }
  const double snapshot_s = std::chrono::duration<double>(Clock::now() - snapshot_started).count();
  checkpoints_->save(at_step, std::move(write), snapshot_s);
}

void TrainingRun::run_eval(int64_t at_step) {
  if (!eval_data_) return;
  // Every rank evaluates the same batches: the gathers need all of them.
  if (sharded_) sharded_->begin_inference();
  auto result = pipeline_ ? evaluate_pipeline()
                          : evaluate(*model_, *eval_data_, t_.micro_batch_size, t_.eval_batches, t_.dtype,
                                     loss_chunk_, recipe_.data.pack);
  if (sharded_) sharded_->end_inference();
  if (!chief_) return;
  fmt::print("eval step {}: loss {:.4f} | perplexity {:.3f}{} | {} tokens\n", at_step, result.loss, result.perplexity,
             accuracy_text(result), result.tokens);
  nlohmann::ordered_json record = {{"step", at_step}, {"eval_loss", result.loss},
                                   {"eval_perplexity", result.perplexity}, {"eval_tokens", result.tokens}};
  if (!std::isnan(result.accuracy)) record["eval_accuracy"] = result.accuracy;
  metrics_->write(record);
}

// evaluate()'s figures through the pipeline: forwards only, the loss on the last stage, whose
// first tp and dp rank's sum every rank then reads.
EvalResult TrainingRun::evaluate_pipeline() {
  torch::NoGradGuard no_grad;
  model_->eval();
  const auto batches = eval_micro_batches(*eval_data_, t_.micro_batch_size, t_.eval_batches, recipe_.data.pack);
  const auto losses = pipeline_schedule_->forward_only(
      batches, [this](int64_t chunk, const data::MicroBatch& batch, int64_t, int64_t, const torch::Tensor& input) {
        return run_chunk(chunk, batch, input, 1.0, 1.0);
      });
  model_->train();
  const bool counts = data_share_ > 0 && mesh_->data_rank() == 0;
  const double loss_sum = counts && losses.loss_sum.defined() ? losses.loss_sum.item<double>() : 0.0;
  EvalResult result;
  for (const auto& batch : batches) result.tokens += batch.target_count;
  const double total = sum_over_ranks(loss_sum);  // every rank takes part
  result.loss = result.tokens ? total / static_cast<double>(result.tokens) : 0.0;
  result.perplexity = std::exp(result.loss);
  return result;
}

// A background thread reads this rank's micro batches ahead of the steps that train on them.
void TrainingRun::start_loader(int64_t from_step, int64_t from_position) {
  loader_.reset();
  loader_.emplace(
      [this, from_step, from_position](int64_t at_step) {
        const int64_t position = from_position + (at_step - from_step) * t_.global_batch_size;
        const auto mine = batch_schedule_->step_samples(position, data_ranks_)[static_cast<size_t>(mesh_->data_rank())];
        std::vector<data::MicroBatch> micro_batches;
        for (int64_t micro = 0; micro < accumulation_; ++micro)
          micro_batches.push_back(data::make_micro_batch(
              *train_data_,
              std::vector<int64_t>(mine.begin() + micro * t_.micro_batch_size,
                                   mine.begin() + (micro + 1) * t_.micro_batch_size),
              recipe_.data.pack));
        return micro_batches;
      },
      from_step, last_step_, recipe_.data.prefetch);
}

// train.spike rollback: the weights of the newest intact checkpoint, and the data from after
// the spike step (the samples since that checkpoint are skipped). False without a checkpoint.
bool TrainingRun::roll_back(const Spike& spike) {
  checkpoints_->finish();               // a background save in flight is committed first
  mesh_->group("world")->barrier();     // and seen by every rank
  const auto choice = store_->newest_intact(/*strict=*/false);
  if (!choice) return false;
  const int64_t spike_step = step_, data_position = samples_consumed_;
  load_checkpoint_state(ckpt::CheckpointReader(choice->dir), choice->dir);
  const int64_t skipped_from = samples_consumed_;
  samples_consumed_ = data_position;
  spikes_in_a_row_ = 0;
  start_loader(step_ + 1, samples_consumed_);
  if (chief_) {
    fmt::print("step {}: loss spike: {}; rolled back to {} (step {}), skipping samples {}-{} (the data of steps "
               "{}-{})\n",
               spike_step, spike.describe(), choice->dir, step_, skipped_from, data_position - 1, step_ + 1,
               spike_step);
    metrics_->write({{"step", spike_step}, {"rollback_to", step_}, {"skipped_samples", {skipped_from, data_position}}});
  }
  return true;
}

}  // namespace

int train(const config::Recipe& recipe, const TrainOptions& options) {
  RunProgress progress;
  auto device_mib = [&] { return static_cast<double>(util::peak_device_memory_bytes(progress.device)) / (1 << 20); };
  try {
    TrainingRun run(recipe, options, progress);
    return run.run();
  } catch (const c10::OutOfMemoryError& e) {
    out_of_memory(progress.step, e.what_without_backtrace(), peak_rss_mib(), device_mib(), recipe);
  } catch (const std::bad_alloc& e) {
    out_of_memory(progress.step, e.what(), peak_rss_mib(), device_mib(), recipe);
  } catch (const c10::Error& e) {
    if (!is_out_of_memory(e)) throw;
    out_of_memory(progress.step, e.what_without_backtrace(), peak_rss_mib(), device_mib(), recipe);
  }
}

int evaluate_checkpoint(const config::Recipe& recipe, const std::string& checkpoint_dir) {
  apply_threads(recipe);
  if (recipe.data.eval.empty())
    throw InputError("data.eval is empty: set it in the recipe or with --set data.eval=PATH");
  auto tokenizer = text::make_tokenizer(recipe.data.tokenizer);
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
  auto result = evaluate(*model, *eval_data, recipe.train.micro_batch_size, recipe.train.eval_batches, recipe.train.dtype,
                         0, recipe.data.pack);
  if (!std::isfinite(result.loss))
    throw std::runtime_error(fmt::format("{}: the eval loss is {} although the weights are finite; the model "
                                         "overflows on this data (try train.dtype: fp32)",
                                         dir, result.loss));
  fmt::print("checkpoint: {} ({})\neval loss {:.6f} | perplexity {:.3f}{} | {} tokens\n", dir, verification,
             result.loss, result.perplexity, accuracy_text(result), result.tokens);
  return 0;
}

}  // namespace xtrain::train
