// Recipe: the fully resolved, typed training recipe. Every field is declared once, with its
// type, default, check and documentation, in the option registry (recipe_options.cpp);
// load_recipe() fills it from YAML plus --set overrides and reports every problem at once.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "config/recipe_choices.h"
#include "layout/memory_choices.h"
#include "layout/mesh_dim.h"
#include "model/spec/float8_scaling.h"
#include "model/spec/lora_config.h"
#include "model/spec/model_config.h"
#include "config/lr_schedule_choice.h"
#include "util/device_setting.h"

namespace xtrain::config {

struct RunSection {
  std::string dir;  // "" resolves to runs/<name>
  int64_t seed = 0;
};

// The model shape is the model's own config; the recipe adds where its first weights come from.
struct ModelSection : model::ModelConfig {
  std::string init_from;  // "" (run.seed's random init) or hf:DIR
  std::vector<std::string> freeze;  // parts of the model (ModelSpec::parts) that do not train
  model::LoraConfig lora;  // model.lora.*: adapters on the named layers, the base frozen
  // model.dropout is ModelConfig::dropout: a recipe's value overrides a Hugging Face folder's
  // (config/hf_import.cpp).
};

struct DataSection {
  std::string train;  // one source, or a list as YAML flow text (data/sources/source_list.h)
  std::string eval;
  std::string tokenizer;
  std::string chat_template;
  Objective objective = Objective::clm;
  double mlm_probability = 0;
  double noise_density = 0.15, mean_noise_span_length = 3.0;  // span_corruption (data/span_corruption.h)
  int64_t seq_len = 0;
  bool shuffle = true;
  bool pack = false;
  int64_t balance_window = 0;
  int64_t prefetch = 0;
  bool skip_bad_images = false;
  // Image classifiers' training augmentation (data/image_augment.h): torchvision's
  // RandomResizedCrop area and aspect ranges (crop_scale empty: no crop) and the mirror probability.
  std::vector<double> crop_scale, crop_ratio;
  double hflip = 0;
  std::string cache_dir;  // "" : text sources are tokenized on every start
};

struct TrainSection {
  int64_t steps = 0;
  int64_t global_batch_size = 0;
  int64_t micro_batch_size = 0;
  Dtype dtype = Dtype::fp32;
  util::DeviceSetting device = util::DeviceSetting::automatic;
  OmpWaitPolicy omp_wait_policy = OmpWaitPolicy::automatic;
  int64_t log_every = 0;
  int64_t eval_every = 0;
  int64_t eval_batches = 0;
  bool eval_at_start = false;
  int64_t threads = 0;
  int64_t max_skipped_steps = 0;
  Spike spike = Spike::off;
  int64_t spike_window = 0;
  double spike_zscore = 0;
  std::string stop_signals;
};

struct OptimSection {
  Optimizer name = Optimizer::adamw;
  double lr = 0;
  double min_lr = 0;
  int64_t warmup_steps = 0;
  LrDecay schedule = LrDecay::cosine;
  std::vector<double> betas;
  double eps = 0;
  double weight_decay = 0;
  double grad_clip = 0;
  int64_t freeze_step = 0;  // onebit_adam
  struct {                  // muon: the 2-D hidden matrices; the rest take AdamW
    double momentum = 0;
    bool nesterov = true;
    int64_t ns_steps = 0;
    MuonAdjustLr adjust_lr = MuonAdjustLr::original;
    MuonNsDtype ns_dtype = MuonNsDtype::bf16;
    double adamw_lr = 0;    // the AdamW part's peak lr; 0: optim.lr
    double qk_clip_tau = 0; // MuonClip's logit threshold; 0: off
  } muon;
};

struct MemorySection {
  std::string chunked_loss;  // auto | off | tokens per chunk
  memory::Attention attention = memory::Attention::automatic;
  int64_t attention_block_size = 0;
  memory::Recompute recompute = memory::Recompute::none;
  double recompute_ratio = 1.0;
  double vision_recompute_ratio = 1.0;
  bool offload_activations = false;
  memory::FusedKernels fused_kernels = memory::FusedKernels::automatic;
};

struct ParallelSection {
  int64_t dp = 1;
  int64_t fsdp = -1;
  int64_t cp = 1;
  parallel::ContextKind cp_kind = parallel::ContextKind::ring;
  bool cp_balance = true;
  int64_t tp = 1;
  int64_t pp = 1;
  int64_t ep = 1;
  int64_t intra_layer_micro_batch = 1;  // Domino-EP
  bool sequence_parallel = false;
  PpSchedule pp_schedule = PpSchedule::one_f_one_b;
  int64_t pp_virtual_stages = 1;
  std::vector<int64_t> pp_layers;  // each chunk's layers (config/pipeline_layout.h); empty: balanced
  bool reshard_after_forward = true;
};

// dist.health_check as a step interval: -1 off, 0 at start only, N also after every N steps; -2
// for text that is none of off, start and every_N.
int64_t health_interval(const std::string& value);

struct DistSection {
  double timeout_s = 0;
  double init_timeout_s = 0;
  double watchdog_s = 0;
  Backend backend = Backend::automatic;
  std::string health_check = "off";  // off, start or every_N (train/health_check.h)
  HealthAction health_action = HealthAction::stop;
  double health_slow_fraction = 0.25;
};

struct PrecisionSection {
  double loss_scale_initial = 0;           // fp16 only
  int64_t loss_scale_growth_interval = 0;  // fp16 only
  model::Float8Scaling fp8 = model::Float8Scaling::off;
  Float8GradFormat fp8_grad = Float8GradFormat::automatic;
  Float8AllGather fp8_all_gather = Float8AllGather::automatic;
};

struct CheckpointSection {
  int64_t every = 0;
  int64_t keep = 0;
  Resume resume;
  bool async = false;
  bool at_start = false;
  bool in_memory = false;  // also kept in the nodes' host memory (train/memory_checkpoints.h)
};

// data.objective dpo: the preference loss and its frozen reference model (train/dpo_loss.h).
struct DpoSection {
  double beta = 0.1;
  DpoLoss loss = DpoLoss::sigmoid;
  double label_smoothing = 0;
  std::string reference;  // "" : the policy's initial weights; hf:DIR : a Hugging Face folder
};

// data.objective grpo: rollouts, their rewards and the clipped-ratio loss (train/grpo_loss.h,
// train/rewards.h); the names and defaults are TRL's GRPOConfig's where it has them.
struct GrpoRewardSection {
  std::string format;       // the format reward's pattern
  int64_t overlong_cache = 0;
  std::string command;
  double timeout_s = 60;
};

struct GrpoSection {
  int64_t num_generations = 8;
  int64_t max_new_tokens = 128;
  double temperature = 1.0;
  double top_p = 1.0;
  int64_t top_k = 0;
  double beta = 0.0;
  double epsilon = 0.2;
  double epsilon_high = 0.0;  // 0: epsilon
  GrpoLoss loss_type = GrpoLoss::dapo;
  GrpoRewardScaling scale_rewards = GrpoRewardScaling::group;
  GrpoRatioLevel importance_sampling_level = GrpoRatioLevel::token;
  int64_t steps_per_rollout = 1;
  int64_t iterations = 1;
  std::vector<std::string> rewards;
  std::vector<double> reward_weights;  // empty: 1 each
  GrpoRewardSection reward;
};

struct MetricsSection {
  bool tensorboard = true;
};

struct Recipe {
  std::string name;
  RunSection run;
  ModelSection model;
  DataSection data;
  TrainSection train;
  OptimSection optim;
  MemorySection memory;
  PrecisionSection precision;
  ParallelSection parallel;
  DistSection dist;
  CheckpointSection checkpoint;
  MetricsSection metrics;
  DpoSection dpo;
  GrpoSection grpo;

  // Micro batches per optimizer step on one data-parallel rank.
  int64_t accumulation_steps(int64_t data_parallel_ranks = 1) const {
    return global_batch_size_per_rank(data_parallel_ranks) / train.micro_batch_size;
  }
  int64_t global_batch_size_per_rank(int64_t data_parallel_ranks) const {
    return train.global_batch_size / data_parallel_ranks;
  }
};

}  // namespace xtrain::config
