#include "train/training_run.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <numeric>
#include <cstdlib>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include "ckpt/checkpoint_reader.h"
#include "model/spec/hf_config.h"
#include "config/batch_geometry.h"
#include "config/option_registry.h"
#include "config/pipeline_layout.h"
#include "config/recipe_loader.h"
#include "model/spec/lora_config.h"
#include "model/spec/model_spec.h"
#include "model/layers/parameter_source.h"
#include "optim/muon.h"
#include "optim/onebit_adam.h"
#include "parallel/compressed_allreduce.h"
#include "parallel/exact_momentum_average.h"
#include "parallel/parallelize.h"
#include "parallel/pipeline_stage.h"
#include "train/dpo_loss.h"
#include "parallel/placement.h"
#include "train/micro_batch_memory.h"
#include "train/qk_clip_layers.h"
#include "train/recipe_agreement.h"
#include "train/recipe_data.h"
#include "train/resume_changes.h"
#include "train/stop_signal.h"
#include "train/training_loss.h"
#include "device/device.h"
#include "util/input_error.h"
#include "util/numeric_fault.h"
#include "util/process_memory.h"
#include "util/signal_names.h"

namespace xtrain::train {

namespace {
using Clock = std::chrono::steady_clock;

// XTRAIN_ONEBIT_EXCHANGE: "compressed" (the default) or "exact" (parallel/exact_momentum_average.h).
bool exact_momentum_exchange() {
  const char* value = std::getenv("XTRAIN_ONEBIT_EXCHANGE");
  const std::string choice = value ? value : "compressed";
  if (choice != "compressed" && choice != "exact")
    throw InputError(fmt::format("environment: XTRAIN_ONEBIT_EXCHANGE is '{}'; set it to compressed (the default) or "
                                 "exact, or unset it",
                                 choice));
  return choice == "exact";
}

// The job's mesh, made once every rank has joined and found the others' recipes equal to its own
// (train/recipe_agreement.h): before any group, which ranks that disagree on the layout would
// wait for in vain.
parallel::DeviceMesh mesh_of_agreeing_ranks(const config::Recipe& recipe, const parallel::World& world,
                                            const parallel::ParallelDegrees& degrees, parallel::CommBackend backend) {
  if (!world.distributed())
    return parallel::build_mesh(world, degrees, recipe.dist.timeout_s, backend, recipe.dist.init_timeout_s);
  auto milliseconds = [](double seconds) { return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)); };
  auto groups = std::make_shared<parallel::ProcessGroups>(world, milliseconds(recipe.dist.timeout_s), backend,
                                                          milliseconds(recipe.dist.init_timeout_s));
  check_ranks_agree(recipe, *groups, world);
  return parallel::DeviceMesh(
      world, degrees,
      [&groups](const std::string& name, const std::vector<int64_t>& ranks) { return groups->make_group(name, ranks); },
      groups);
}
}  // namespace

TrainingRun::TrainingRun(const config::Recipe& recipe, const TrainOptions& options, RunProgress& progress)
    : recipe_(recipe), t_(recipe.train), options_(options), progress_(progress), world_(parallel::discover_world()),
      chief_(world_.rank == 0),
      lr_schedule_{recipe.optim.lr, recipe.optim.min_lr, recipe.optim.warmup_steps, recipe.train.steps,
                   recipe.optim.schedule} {
  apply_threads(recipe_, world_.local_size);
  check_layout();
  fault_ = planned_fault(world_.rank, world_.restart_count);
  util::numeric_fault();  // a malformed XTRAIN_NUMERIC_FAULT fails here, before any work
  injected_spike_ = fault_;
  // Everything that can fail on bad input happens before the run folder is created.
  load_data();
  device_ = util::choose_device(t_.device, world_.local_rank);
  progress_.device = device_;
  if (recipe_.data.objective == config::Objective::grpo)
    grpo_ = std::make_unique<GrpoRollouts>(recipe_, *tokenizer_, device_);
  const auto backend = comm_backend(recipe_.dist.backend, device_);
  store_ = std::make_unique<ckpt::CheckpointStore>(recipe_.run.dir, recipe_.checkpoint.keep);
  // Choosing, verifying and reading the checkpoint, for metrics.jsonl's resume_read_s.
  auto timed = [this](auto&& read) {
    const auto started = std::chrono::steady_clock::now();
    read();
    resume_read_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };
  // With checkpoints in memory, the disk's copy is read (and verified) only if memory's fails.
  const auto latest = store_->latest();
  const bool memory_first = recipe_.checkpoint.in_memory && resumes_from_latest(recipe_) && latest;
  if (memory_first)
    resume_from_ = ResumeFrom{*latest, "not verified yet"};
  else
    timed([&] { resume_from_ = checkpoint_to_resume(recipe_, *store_, chief_); });
  build_model();
  check_micro_batch_memory();
  mesh_ = mesh_of_agreeing_ranks(recipe_, world_, degrees_, backend);
  if (recipe_.checkpoint.in_memory) make_memory_checkpoints();
  if (memory_first) timed([&] { resume_from_ = read_from_memory_or_disk(); });
  watchdog_ = std::make_unique<parallel::Watchdog>(mesh_->process_groups(), world_, recipe_.dist.watchdog_s);
  // Told to stop (the launcher's SIGTERM when another rank failed) and not yet stopped: a lost store
  // means rank 0 died, reported before the launcher's SIGKILL can end this rank silent.
  watchdog_->report_lost_store_host_when([] { return stop_requested() && !stop_checkpoint_saved(); });
  sums_ = std::make_unique<RankSums>(mesh_->group(parallel::Dim::world), device_);
  parallelize_model();
  report_ = std::make_unique<StepReport>(recipe_, degrees_, last_step_, train_data_ ? train_data_->num_samples() : 0,
                                         device_, world_.distributed(), chief_);
  if (resume_from_) timed([&] { resume(); });
  if (!options_.setup_only) open_outputs();
  print_summary();
}

void TrainingRun::check_layout() {
  degrees_ = parallel::resolve_degrees(
      {recipe_.parallel.dp, recipe_.parallel.fsdp, recipe_.parallel.tp, recipe_.parallel.pp, recipe_.parallel.ep,
       recipe_.parallel.cp},
      world_.size);
  data_ranks_ = degrees_.dp * degrees_.fsdp;
  if (auto problem = config::batch_geometry_problem(t_.global_batch_size, t_.micro_batch_size, data_ranks_))
    throw InputError("train.global_batch_size: " + *problem);
  accumulation_ = t_.global_batch_size / data_ranks_ / t_.micro_batch_size;
  if (options_.stop_at_step < 0 || options_.stop_at_step > t_.steps)
    throw InputError(
        fmt::format("--stop-at-step {} is outside 1..train.steps ({})", options_.stop_at_step, t_.steps));
  if (recipe_.parallel.pp_schedule == config::PpSchedule::interleaved_1f1b && degrees_.pp > 1 &&
      accumulation_ % degrees_.pp != 0)
    throw InputError(fmt::format("parallel.pp_schedule interleaved_1f1b runs micro batches in groups of pp {}: "
                                 "train.global_batch_size / (micro_batch_size x data ranks) = {} must be a multiple",
                                 degrees_.pp, accumulation_));
  if (degrees_.pp > 1 && accumulation_ < config::min_micro_batches(recipe_.parallel.pp_schedule, degrees_.pp))
    throw InputError("train.global_batch_size: " + config::min_micro_batches_problem(recipe_.parallel.pp_schedule,
                                                                                     degrees_.pp, accumulation_));
  // FSDP reduce-scatters each block's gradients as its backward ends, before W adds the weights'.
  if (config::splits_backward(recipe_.parallel.pp_schedule) && degrees_.pp > 1 && degrees_.fsdp > 1)
    throw InputError(fmt::format("parallel.fsdp: {} defers the weight gradients past each block's backward, "
                                 "where FSDP {} reduce-scatters them: set parallel.fsdp 1 (parallel.dp replicates "
                                 "the stages) or parallel.pp_schedule 1f1b",
                                 to_string(recipe_.parallel.pp_schedule), degrees_.fsdp));
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
  if (recipe_.data.objective == config::Objective::grpo) return;  // prompts: GrpoRollouts
  train_data_ = load_recipe_dataset("data.train", recipe_.data.train, *tokenizer_, recipe_, recipe_.data.shuffle);
  if (!recipe_.data.eval.empty())
    eval_data_ = load_recipe_dataset("data.eval", recipe_.data.eval, *tokenizer_, recipe_, false);
}

// The model without parameter storage; parallelize_model() materialises what this rank keeps. A
// resumed run starts from run.seed's init, which the checkpoint then overwrites.
void TrainingRun::build_model() {
  model_ = train::build_model(recipe_);
  model::place_unmaterialized(*model_, device_);
  model::accumulate_lookup_grads_in_place(*model_);
  initial_weights_ = initial_weights(recipe_, *model_, /*fresh=*/!resume_from_);
  if (!resume_from_ && !recipe_.model.init_from.empty())
    imported_hf_config_ = ckpt::read_hf_config(recipe_.model.init_from.substr(3));
  std::vector<optim::NamedParameter> whole;
  for (const auto& item : model_->named_parameters()) whole.push_back({item.key(), item.value(), false});
  check_numeric_fault_parameter(whole);
  total_parameters_ = model_->num_parameters();
  experts_ = std::make_unique<ExpertBalance>(*model_, recipe_.model.router_bias_update_rate);
  loss_chunk_ = loss_chunk_tokens(recipe_);
}

// The layout (parallel/parallelize.h), this rank's pieces, the optimizer over them, and the step
// and run state built on those.
void TrainingRun::parallelize_model() {
  const auto started = Clock::now();
  const auto& spec = model::model_spec(recipe_.model.family);
  parallel_ = parallel::parallelize(model_, *mesh_, parallelize_options(recipe_, device_), initial_weights_.source);
  trained_ = TrainedParameters::of(*parallel_, [&spec](const std::string& name, size_t dims) {
    return spec.decays(name, static_cast<int64_t>(dims));
  });
  freeze_parts();
  make_optimizer();
  print_lora_summary();
  if (t_.dtype == config::Dtype::fp16) {
    optim::LossScalerOptions scaling;
    scaling.initial_scale = recipe_.precision.loss_scale_initial;
    scaling.growth_interval = recipe_.precision.loss_scale_growth_interval;
    loss_scaler_.emplace(scaling);
  }
  auto* scaler = loss_scaler_ ? &*loss_scaler_ : nullptr;
  schedule_ = make_schedule(*parallel_, *mesh_, recipe_.parallel.pp_schedule, recipe_.parallel.pp_virtual_stages,
                            device_);
  StepSettings settings{t_.dtype,          device_,          loss_chunk_,        recipe_.optim.grad_clip,
                        t_.spike != config::Spike::off, t_.max_skipped_steps, t_.spike_window, t_.spike_zscore, chief_};
  training_step_ = std::make_unique<TrainingStep>(*parallel_, *schedule_, *optimizer_, scaler, trained_.optimized,
                                                  *experts_, *mesh_, *sums_, settings);
  if (recipe_.data.objective == config::Objective::dpo) training_step_->use_dpo(make_dpo_objective(recipe_, device_));
  if (grpo_)
    training_step_->use_grpo(std::make_unique<GrpoObjective>(grpo_settings(recipe_), recipe_.grpo.temperature));
  training_step_->key_dropout(static_cast<uint64_t>(recipe_.run.seed), recipe_.model.lora.dropout > 0);
  RunIdentity identity{recipe_.data.seq_len, degrees_, recipe_.parallel.sequence_parallel,
                       {{"global_batch_size", t_.global_batch_size},
                        {"balance_window", recipe_.data.balance_window},
                        {"pack", recipe_.data.pack}}};
  state_ = std::make_unique<RunState>(*parallel_, trained_, *optimizer_, scaler, *experts_, *mesh_, *sums_, device_,
                                      std::move(identity));
  if (!initial_weights_.expert_bias.is_null())
    experts_->load_state(initial_weights_.expert_bias, recipe_.model.init_from);
  const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  const auto rss = sums_->sum_and_spread(0.0, util::peak_rss_mib()).second;
  if (chief_ && !resume_from_)  // a resumed run says where it resumed from instead
    fmt::print("model: initial weights from {}, {} on each rank ({:.2f} s)\n", initial_weights_.description,
               parallel_->weights_per_rank(), seconds);
  if (chief_ && parallel_->pipeline_stage()) fmt::print("pipeline: {}\n", parallel_->pipeline_stage()->describe_cut());
  // The state as the whole model would hold it (parameters, gradients, AdamW's two moments, fp32).
  const double whole_state_mib = static_cast<double>(total_parameters_) * 16 / (1 << 20);
  if (chief_)
    fmt::print("memory at start: peak resident {:.0f} MiB (rank {}; mean {:.0f}), this rank's state {:.0f} MiB, the "
               "whole model's state {:.0f} MiB\n",
               rss.max, rss.argmax, rss.mean, static_cast<double>(state_bytes()) / (1 << 20), whole_state_mib);
  initial_weights_ = {};  // closes the folder's files
}

// AdamW, or 1-bit Adam over the data-parallel replicas (the recipe loader refused other layouts;
// a replica count of 1 shows only once -1 degrees are resolved).
void TrainingRun::make_optimizer() {
  const optim::AdamWOptions options{recipe_.optim.betas[0], recipe_.optim.betas[1], recipe_.optim.eps,
                                    recipe_.optim.weight_decay,
                                    recipe_.memory.fused_kernels != memory::FusedKernels::off};
  if (recipe_.optim.name == config::Optimizer::adamw) {
    optimizer_ = std::make_unique<optim::AdamW>(trained_.optimized, options);
    return;
  }
  if (recipe_.optim.name == config::Optimizer::muon) {
    make_muon(options);
    return;
  }
  const bool sharded = parallel_->switches_replica_reduction();
  if (!sharded || mesh_->size(parallel::Dim::dp) < 2)
    throw InputError(fmt::format("optim.name: onebit_adam compresses the momentum exchanged between data-parallel "
                                 "replicas, and this layout has {} (world size {}): set parallel.dp above 1",
                                 sharded ? mesh_->size(parallel::Dim::dp) : 1, mesh_->world().size));
  auto replicas = mesh_->group(parallel::Dim::dp);
  const auto device = device_;
  const bool exact = exact_momentum_exchange();
  if (exact && chief_)
    fmt::print("notice: XTRAIN_ONEBIT_EXCHANGE=exact: 1-bit Adam's momenta are averaged uncompressed (an ablation, as "
               "many bytes as AdamW)\n");
  optimizer_ = std::make_unique<optim::OnebitAdam>(
      trained_.optimized, options, recipe_.optim.freeze_step,
      [replicas, device, exact](const std::vector<int64_t>& sizes) -> std::unique_ptr<optim::MomentumExchange> {
        if (exact) return std::make_unique<parallel::ExactMomentumAverage>(replicas);
        return std::make_unique<parallel::CompressedAllReduce>(replicas, sizes,
                                                               torch::TensorOptions().dtype(torch::kFloat32).device(device));
      },
      [model = parallel_.get()](bool compressing) { model->set_replica_reduction(!compressing); });
}

// Muon for the hidden matrices (optim/muon.h's rule), AdamW for the rest. A matrix is assembled
// by all-reduces (each rank's part in place, zeros elsewhere): its box from FSDP's pieces over
// the shard group of its unit (the experts' "edp" under expert parallelism, else fsdp's), and a
// tensor-parallel slice's whole matrix over the tp group. An expert stack's box holds whole
// experts (split by expert over tp and ep), each orthogonalised on the ranks that hold it.
void TrainingRun::make_muon(const optim::AdamWOptions& adamw_options) {
  const auto& m = recipe_.optim.muon;
  optim::MuonOptions options;
  options.momentum = m.momentum;
  options.nesterov = m.nesterov;
  options.ns_steps = m.ns_steps;
  options.adjust_lr = m.adjust_lr == config::MuonAdjustLr::match_rms_adamw ? optim::MuonAdjustLr::match_rms_adamw
                                                                           : optim::MuonAdjustLr::original;
  options.ns_dtype = m.ns_dtype == config::MuonNsDtype::fp32 ? torch::kFloat32 : torch::kBFloat16;
  options.weight_decay = recipe_.optim.weight_decay;
  options.adamw_lr_ratio = m.adamw_lr > 0 ? m.adamw_lr / recipe_.optim.lr : 1.0;
  if (util::numeric_fault().is(util::NumericFaultKind::muon_piece))
    options.orthogonalize = optim::MuonOrthogonalize::piece;
  std::vector<optim::NamedParameter> adamw_part;
  std::vector<optim::MuonMatrix> matrices;
  std::set<std::string> muon_names, adamw_names;
  int64_t muon_numel = 0, adamw_numel = 0;
  for (size_t i = 0; i < trained_.optimized.size(); ++i) {
    const auto& p = trained_.optimized[i];
    const auto& layout = trained_.layouts[i];
    int64_t numel = 1;
    for (int64_t size : layout.shape) numel *= size;
    if (!p.frozen && optim::muon_takes(p.name, layout.shape.size())) {
      matrices.push_back({p, layout.shape, layout.begin, layout.offsets, layout.sizes, {}, {}});
      const bool experts = layout.shape.size() == 3;
      if (auto group = mesh_->shard_group(experts && mesh_->size(parallel::Dim::ep) > 1 ? parallel::Dim::edp
                                                                                          : parallel::Dim::fsdp);
          group->size() > 1)
        matrices.back().sum_pieces = [group](torch::Tensor& box) { group->all_reduce_sum(box).wait(); };
      // A slice of a 2-D matrix is tensor parallelism's (the same cut on every tp rank); a
      // matrix left whole is a copy on each tp rank, which updates its own.
      if (auto tp = mesh_->group(parallel::Dim::tp); !experts && layout.sizes != layout.shape)
        matrices.back().sum_boxes = [tp](torch::Tensor& whole) { tp->all_reduce_sum(whole).wait(); };
      if (muon_names.insert(p.name).second) muon_numel += numel;
    } else {
      adamw_part.push_back(p);
      if (!p.frozen && adamw_names.insert(p.name).second) adamw_numel += numel;
    }
  }
  if (chief_)
    fmt::print("optim: muon on {} matrices ({} parameters; momentum {}, nesterov {}, {} Newton-Schulz steps in {}, "
               "adjust_lr {}), adamw on {} tensors ({} parameters: embeddings, head, norms, biases, routers; lr "
               "x{})\n",
               muon_names.size(), muon_numel, m.momentum, m.nesterov, m.ns_steps, config::to_string(m.ns_dtype),
               config::to_string(m.adjust_lr), adamw_names.size(), adamw_numel, options.adamw_lr_ratio);
  auto muon = std::make_unique<optim::Muon>(std::move(adamw_part), std::move(matrices), adamw_options, options);
  if (m.qk_clip_tau > 0) {
    muon->use_qk_clip(make_qk_clip(*model_, trained_, m.qk_clip_tau, mesh_->group(parallel::Dim::world), device_));
    if (chief_) fmt::print("optim: muon qk-clip at logit {} over every attention head\n", m.qk_clip_tau);
  }
  optimizer_ = std::move(muon);
}

// model.freeze: the frozen parts' parameters take no gradient (autograd skips them) and the
// optimizer neither updates them nor keeps state for them.
void TrainingRun::freeze_parts() {
  const auto prefixes = frozen_prefixes(recipe_);
  // Also frozen: what the model itself marks as taking no gradient (llava's unused tower layers).
  std::set<std::string> fixed;
  const bool lora = recipe_.model.lora.enabled();  // then only the adapters train
  for (auto& item : model_->named_parameters()) {
    if (has_prefix(item.key(), prefixes) || (lora && !model::is_lora_parameter(item.key())))
      item.value().requires_grad_(false);
    if (!item.value().requires_grad()) fixed.insert(item.key());
  }
  int64_t frozen = 0;
  std::set<std::string> counted;  // a parameter's shards and pieces count once, by its whole shape
  for (size_t i = 0; i < trained_.optimized.size(); ++i) {
    auto& p = trained_.optimized[i];
    p.frozen = fixed.count(p.name) > 0;
    if (!has_prefix(p.name, prefixes) || !counted.insert(p.name).second) continue;
    int64_t numel = 1;
    for (int64_t size : trained_.layouts[i].shape) numel *= size;
    frozen += numel;
  }
  if (chief_ && !prefixes.empty())
    fmt::print("model: frozen {} ({} parameters); {} train\n", fmt::join(recipe_.model.freeze, ", "), frozen,
               total_parameters_ - frozen);
}

// model.lora: what trains, and the optimizer state it takes (AdamW's two moments of the adapters
// alone: the base weights, frozen, have none).
void TrainingRun::print_lora_summary() const {
  if (!chief_ || !recipe_.model.lora.enabled()) return;
  int64_t adapters = 0, layers = 0, state_values = 0;
  std::set<std::string> counted;
  for (size_t i = 0; i < trained_.optimized.size(); ++i) {
    const auto& p = trained_.optimized[i];
    if (!p.frozen) state_values += 2 * p.tensor.numel();
    if (!model::is_lora_parameter(p.name) || !counted.insert(p.name).second) continue;
    int64_t numel = 1;
    for (int64_t size : trained_.layouts[i].shape) numel *= size;
    adapters += numel;
    layers += p.name.find(".lora_A.") != std::string::npos ? 1 : 0;
  }
  const auto& lora = recipe_.model.lora;
  fmt::print("lora: rank {}, alpha {} on {} ({} layers): {} adapter parameters train, {} base parameters frozen; "
             "optimizer state {} values on this rank ({:.1f} KiB)\n",
             lora.rank, lora.alpha, fmt::join(lora.targets, ", "), layers, adapters, total_parameters_ - adapters,
             state_values, static_cast<double>(state_values) * sizeof(float) / 1024);
}

// Its own group over every rank: the copies run in the background beside the training's
// collectives.
void TrainingRun::make_memory_checkpoints() {
  std::vector<int64_t> everyone(static_cast<size_t>(world_.size));
  std::iota(everyone.begin(), everyone.end(), int64_t{0});
  auto group = mesh_->process_groups() ? mesh_->process_groups()->make_group("checkpoint_memory", everyone)
                                       : parallel::make_single_process_comm("checkpoint_memory");
  memory_ = std::make_unique<MemoryCheckpoints>(node_memory_folder(recipe_.run.dir), std::move(group),
                                                world_.local_size, device_);
}

// The step `latest` names, from the nodes' memory when every node's copy verifies there, else
// from disk (verified, or the newest that verifies, as without memory).
ResumeFrom TrainingRun::read_from_memory_or_disk() {
  const auto step = ckpt::step_of(std::filesystem::path(resume_from_->dir).filename().string());
  if (step)
    if (const auto assembled = memory_->assemble(*step))
      return ResumeFrom{assembled->dir,
                        fmt::format("from host memory: {} files ({:.1f} MiB) fetched from other nodes, assembled in "
                                    "{:.2f} s; {}",
                                    assembled->files_fetched, static_cast<double>(assembled->bytes_fetched) / (1 << 20),
                                    assembled->seconds, assembled->verification),
                        "memory"};
  auto from_disk = checkpoint_to_resume(recipe_, *store_, chief_);
  if (!from_disk) throw InputError(fmt::format("{}: names no checkpoint that can be read", resume_from_->dir));
  return *from_disk;
}

void TrainingRun::resume() {
  const std::string& dir = resume_from_->dir;
  ckpt::CheckpointReader checkpoint(dir);
  check_model_unchanged(recipe_, checkpoint.recipe_yaml, dir);
  imported_hf_config_ = checkpoint.model_config;
  state_->load(checkpoint, dir);
  if (grpo_) grpo_->restore_rollout(dir);
  check_resumed_schedule(dir);
  // After the balance checks, whose messages say more about their case.
  resume_notices_ = check_resume_changes(recipe_, checkpoint.recipe_yaml, dir,
                                         {options_.allow_changed, options_.allow_data_change});
  // --allow-changed optim.name: the loaded moments are the other optimizer's; the new one starts
  // from zeros at its step 0 (the weights, data position and lr schedule continue).
  if (std::any_of(resume_notices_.begin(), resume_notices_.end(),
                  [](const std::string& notice) { return notice.rfind("optim.name:", 0) == 0; })) {
    auto fresh = optimizer_->state();
    for (auto& [key, value] : fresh) value = torch::zeros_like(value);
    optimizer_->load_state(fresh);
  }
  if (chief_) {
    fmt::print("resumed from {} at step {} ({})\n", dir, state_->step, resume_from_->verification);
    for (const auto& notice : resume_notices_) fmt::print("notice: changed since the checkpoint: {}\n", notice);
  }
}

// A balanced order sorts windows of balance_window x global_batch_size samples by a cost that
// depends on data.pack: continuing it needs the same three (any number of ranks will do).
void TrainingRun::check_resumed_schedule(const std::string& dir) const {
  if (recipe_.data.balance_window == 0) return;
  if (!state_->saved_schedule().is_null() && state_->saved_schedule() != state_->data_schedule())
    throw InputError(fmt::format(
        "{}: this run balanced its data with train.global_batch_size {}, data.balance_window {} and data.pack {}, "
        "the recipe says {}, {} and {}; the balanced sample order depends on all three, so resume with the "
        "checkpoint's values",
        dir, state_->saved_schedule().value("global_batch_size", 0), state_->saved_schedule().value("balance_window", 0),
        state_->saved_schedule().value("pack", false), t_.global_batch_size, recipe_.data.balance_window, recipe_.data.pack));
  if (state_->samples_consumed % t_.global_batch_size != 0)
    throw InputError(fmt::format("{}: {} samples consumed is not a whole number of global batches of {}; resume "
                                 "with the checkpoint's train.global_batch_size or without data.balance_window",
                                 dir, state_->samples_consumed, t_.global_batch_size));
}

void TrainingRun::open_outputs() {
  clear_stop_file_at_start(recipe_.run.dir, chief_);
  if (chief_) {
    prepare_run_folder(recipe_.run.dir);
    store_->remove_stale_temp_folders();
  }
  mesh_->group(parallel::Dim::world)->barrier();
  recipe_yaml_ = config::dump_recipe(recipe_);
  report_->open_metrics(state_->step, recipe_yaml_);
  install_stop_signal_handlers(util::parse_signal_list(t_.stop_signals));
  const int64_t shards = parallel_->checkpoint_shards();
  CheckpointWriter::CopyCommitted keep_in_memory;
  if (memory_)
    keep_in_memory = [this](int64_t at_step, const std::string& folder) {
      const auto started = std::chrono::steady_clock::now();
      memory_->keep(at_step, folder);
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    };
  checkpoints_ = std::make_unique<CheckpointWriter>(
      *store_, *mesh_->group(parallel::Dim::world), device_, recipe_.checkpoint.async,
      [this, shards](int64_t at_step, const std::string& folder, double blocking_s, double write_s, double copy_s) {
        fmt::print("checkpoint: {}{} (written in {:.2f} s{}; the steps waited {:.2f} s)\n", folder,
                   shards > 0 ? fmt::format(" ({} shards)", shards) : "", write_s,
                   memory_ ? fmt::format(", its copy to host memory started (the last took {:.2f} s)",
                                         memory_->last_copy_seconds())
                           : "",
                   blocking_s);
        nlohmann::ordered_json record = {{"step", at_step}, {"checkpoint", folder}, {"checkpoint_write_s", write_s},
                                         {"checkpoint_blocking_s", blocking_s}};
        if (memory_) record["checkpoint_memory_wait_s"] = copy_s;
        report_->record(record);
      },
      std::move(keep_in_memory));
  if (chief_ && resume_from_) {
    nlohmann::ordered_json record = {{"step", state_->step}, {"resumed_from", resume_from_->dir},
                                     {"resume_source", resume_from_->source}, {"resume_read_s", resume_read_s_}};
    report_->record(record);
  }
}

void TrainingRun::print_summary() const {
  if (!chief_) return;
  const auto& m = recipe_.model;
  fmt::print("model: {} parameters ({} layers, hidden {}, heads {}/{} kv, vocab {})\n", total_parameters_,
             m.num_layers, m.hidden_size, m.num_heads, m.num_kv_heads, m.vocab_size);
  // The recipe loader let it through only with model.dropout: 0, or took it (a family with dropout).
  if (m.dropout > 0) fmt::print("model: dropout {} (keyed masks, the same on every layout)\n", m.dropout);
  if (const auto dropout = ckpt::hf_dropout(imported_hf_config_); !dropout.empty() && m.dropout == 0)
    fmt::print("model: trains without the dropout of its Hugging Face config ({}; model.dropout: 0); the export "
               "keeps those values\n",
               ckpt::describe(dropout));
  if (grpo_)
    fmt::print("data: {} prompts; {} completions a prompt, {} a rollout\n", grpo_->prompts(),
               recipe_.grpo.num_generations, t_.global_batch_size * recipe_.grpo.steps_per_rollout);
  else
    print_data_summary();
  fmt::print("parallel: {}{}{}\n", mesh_->describe(),
             degrees_.cp > 1 ? fmt::format(", {} attention", to_string(recipe_.parallel.cp_kind)) : "",
             recipe_.parallel.sequence_parallel ? " with sequence parallelism" : "");
  if (recipe_.precision.fp8 != model::Float8Scaling::off) print_float8_line();
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
             tokens_per_step_, to_string(t_.dtype), torch::get_num_threads(), wait_policy ? wait_policy : "default");
  if (const auto warning = lr_schedule_.warmup_warning(); !warning.empty()) fmt::print("warning: {}\n", warning);
  if (recipe_.optim.name == config::Optimizer::onebit_adam) {
    if (const auto warning = optim::onebit_adam_beta2_warning(recipe_.optim.betas.at(1)); !warning.empty())
      fmt::print("warning: {}\n", warning);
    if (const auto warning = optim::onebit_adam_freeze_warning(recipe_.optim.freeze_step, t_.steps); !warning.empty())
      fmt::print(stderr, "warning: {}\n", warning);
  }
  for (const auto& warning : float8_unused_key_warnings(recipe_.precision)) fmt::print(stderr, "warning: {}\n", warning);
}

void TrainingRun::print_data_summary() const {
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
}

// Which FP8 GEMM runs (model/layers/float8_linear.h), in which formats, and how FSDP gathers.
void TrainingRun::print_float8_line() const {
  const auto options = parallelize_options(recipe_, device_);
  const bool gathers = options.float8_all_gather && mesh_->size(parallel::Dim::fsdp) > 1;
  fmt::print("fp8: {} ({}), output gradients {}{}\n", to_string(options.float8.scaling),
             model::float8_gemm_path(options.float8.scaling, device_.type()),
             options.float8.grad_format == c10::ScalarType::Float8_e5m2 ? "e5m2" : "e4m3",
             gathers ? ", FSDP gathers weights in fp8" : "");
  if (const auto warning = float8_recipe_warning(recipe_); !warning.empty()) fmt::print("warning: {}\n", warning);
}

}  // namespace xtrain::train
