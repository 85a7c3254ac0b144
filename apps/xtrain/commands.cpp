#include "commands.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <utility>

#include <fmt/format.h>
#include <torch/torch.h>

#include "ckpt/checkpoint.h"
#include "ckpt/checkpoint_export.h"
#include "ckpt/hf_folder.h"
#include "config/pipeline_layout.h"
#include "config/recipe_loader.h"
#include "data/data_prepare.h"
#include "data_cache_command.h"
#include "launch/data_positions.h"
#include "launch/goodput.h"
#include "model/spec/model_spec.h"
#include "omp_wait_policy.h"
#include "plan/plan_report.h"
#include "plan/published_runs.h"
#include "parallel/tcp_agent_store.h"
#include "text/tokenizer.h"
#include "train/balance_report.h"
#include "train/batch_dump.h"
#include "train/generate.h"
#include "train/health_check.h"
#include "train/generate_prompt.h"
#include "train/model_census.h"
#include "train/model_factory.h"
#include "train/non_finite_guard.h"
#include "train/trainer.h"
#include "device/blas_probe.h"
#include "util/build_info.h"
#include "device/device.h"
#include "util/durable_file.h"
#include "util/input_error.h"
#include "util/progress_line.h"

namespace xtrain::cli {
namespace {

// The recipe file and its --set overrides, which every recipe-reading command takes.
struct RecipeArgs {
  std::string path;
  std::vector<std::string> overrides;

  void declare(CLI::App* command) {
    command->add_option("recipe", path, "Recipe YAML file")->required();
    command->add_option("--set", overrides, "Override a recipe key: key.path=value (repeatable)");
  }
  config::Recipe load() const {
    config::LoadOptions options;
    options.overrides = overrides;
    return config::load_recipe(path, options);
  }
};

// Argument storage that outlives the declaring function: CLI11 writes into it while parsing.
template <class T>
std::shared_ptr<T> storage() {
  return std::make_shared<T>();
}

// A command that reads a recipe, and the options of what it runs.
template <class Options>
struct RecipeCommandArgs {
  RecipeArgs recipe;
  Options options;
};

template <class Options>
std::pair<CLI::App*, std::shared_ptr<RecipeCommandArgs<Options>>> add_recipe_command(CLI::App& parent,
                                                                                   const std::string& name,
                                                                                   const std::string& description) {
  auto args = storage<RecipeCommandArgs<Options>>();
  auto* command = parent.add_subcommand(name, description);
  args->recipe.declare(command);
  return {command, args};
}

Command add_train(CLI::App& app, char** argv) {
  auto [command, args] =
      add_recipe_command<train::TrainOptions>(app, "train", "Train (or resume training) a model from a recipe");
  command->add_option("--stop-at-step", args->options.stop_at_step,
                      "End cleanly after step N with a checkpoint; the same command resumes later");
  command->add_option("--allow-changed", args->options.allow_changed,
                      "Resume although this recipe key (data order or batch geometry) differs from the "
                      "checkpoint's run (repeatable)");
  command->add_flag("--allow-data-change", args->options.allow_data_change,
                    "Resume although run.seed or the data (source, tokenizer, order, batch geometry) differs from "
                    "the checkpoint's run: the next steps read other samples than the run would have");
  command->add_flag("--setup-only", args->options.setup_only,
                    "Set up the run (data, mesh, model materialised and sharded, optimizer, checkpoint) and report "
                    "its memory, then exit 0 without training or writing anything");
  return {command, [args = args, argv] {
            auto recipe = args->recipe.load();
            apply_omp_wait_policy(recipe, argv);
            return train::train(recipe, args->options);
          }};
}

// A YAML comment, so that validate's output stays a recipe: the model's size, and with experts
// the part one token passes through. The model is built without parameter storage.
std::string parameter_summary(const config::Recipe& recipe) {
  const auto model = train::build_model(recipe);
  auto count = [](int64_t n) {
    const auto x = static_cast<double>(n);
    return x >= 1e9 ? fmt::format("{:.2f}B", x / 1e9) : fmt::format("{:.2f}M", x / 1e6);
  };
  const auto& m = recipe.model;
  if (m.num_experts == 0) return "# parameters: " + count(model->num_parameters());
  return fmt::format("# parameters: {} in all, {} active per token ({} of {} experts in {} MoE layers)",
                     count(model->num_parameters()), count(model->num_active_parameters()), m.num_experts_per_tok,
                     m.num_experts, m.num_moe_layers());
}

// Rank checks and link rates on the mesh a recipe trains on; launched like training.
Command add_health(CLI::App& app) {
  struct HealthArgs {
    RecipeArgs recipe;
    train::HealthOptions options;
    double slow_fraction = -1;  // the recipe's dist.health_slow_fraction unless given
    std::string on_problem;     // the recipe's dist.health_action unless given
  };
  auto args = storage<HealthArgs>();
  auto* command = app.add_subcommand(
      "health",
      "Check every rank (a seeded matmul chain each healthy rank reproduces bit for bit, its matmul rate) and the "
      "collectives of every mesh group of RECIPE's layout; start it as training starts (xtrain launch, torchrun, srun)");
  args->recipe.declare(command);
  command->add_option("--slow-fraction", args->slow_fraction,
                      "Name a rank whose matmul rate is below the median by more than this share (default: the "
                      "recipe's dist.health_slow_fraction)")
      ->check(CLI::Range(0.0, 1.0));
  command->add_option("--on-problem", args->on_problem, "stop (exit 3) or warn (exit 0) when a rank is named "
                                                        "(default: the recipe's dist.health_action)")
      ->check(CLI::IsMember({"stop", "warn"}));
  command->add_option("--matmul-size", args->options.matmul_size, "n of the n x n matmuls")->check(CLI::Range(16, 8192));
  command->add_option("--message-bytes", args->options.message_bytes, "Bytes per rank of each timed collective")
      ->check(CLI::Range(int64_t{1024}, int64_t{1} << 32));
  return {command, [args] {
            const auto recipe = args->recipe.load();
            auto options = args->options;
            options.slow_fraction = args->slow_fraction >= 0 ? args->slow_fraction : recipe.dist.health_slow_fraction;
            const bool stop = args->on_problem.empty() ? recipe.dist.health_action == config::HealthAction::stop
                                                       : args->on_problem == "stop";
            return train::run_health_check(recipe, options, stop);
          }};
}

// Every run of a published-runs file planned against its published figure; exit 1 when a run that
// is not a calibration row misses by more than its tolerance. With `run_name`, that run's whole plan.
// With `holdout_source`, the efficiencies fitted on every other source and that source's errors
// (every source's in turn for "all"); with `fit`, the fit on the calibration rows.
int check_published_runs(const std::string& file, double max_error_percent, const std::string& run_name,
                         const std::string& holdout_source = "", bool fit = false) {
  const auto runs = plan::load_published_runs(file);
  if (!run_name.empty()) {
    for (const auto& run : runs.runs) {
      if (run.name != run_name) continue;
      const auto recipe = plan::recipe_of(runs, run);
      plan::PlanRequest request;
      request.nodes = run.nodes;
      request.gpus_per_node = run.gpus_per_node;
      request.hardware = run.hardware;
      request.overlap = run.overlap;
      request.attention_kernel = run.attention_kernel;
      request.fp8_linear = run.fp8_linear;
      return plan::print_plan(train::model_census(recipe), recipe, request) ? 0 : 3;
    }
    throw InputError(fmt::format("--run {}: {} has no such run", run_name, file));
  }
  const auto planned = plan::plan_published_runs(runs, train::model_census);
  if (!holdout_source.empty())
    return plan::print_holdout(runs, planned, holdout_source, max_error_percent / 100) == 0 ? 0 : 1;
  if (fit) {
    plan::print_calibration_fit(planned);
    return 0;
  }
  std::vector<plan::PublishedCheck> checks;
  for (const auto& p : planned) checks.push_back(plan::check_planned_run(p));
  return plan::print_published_checks(runs, checks, max_error_percent / 100) == 0 ? 0 : 1;
}

// Memory and step time of a recipe on a cluster, without running it; exit 3 when its own layout
// does not fit. --validate plans a file of published runs instead and compares.
Command add_plan(CLI::App& app) {
  struct PlanArgs {
    RecipeArgs recipe;
    plan::PlanRequest request;
    std::string published, run_name, holdout_source;
    double max_error_percent = 15, expert_load_ratio = 1;
    bool fit = false;
  };
  auto args = storage<PlanArgs>();
  auto* command = app.add_subcommand(
      "plan", "Estimate RECIPE's memory per rank and step time on a cluster (exit 3 when it does not fit); "
              "--search ranks the layouts that fit");
  args->recipe.declare(command);
  command->add_option("--nodes", args->request.nodes, "Nodes")->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  command->add_option("--gpus-per-node", args->request.gpus_per_node, "Devices a node (an NVLink domain)")
      ->check(CLI::Range(int64_t{1}, int64_t{1024}));
  command->add_option("--hardware", args->request.hardware,
                      "A profile of data/hardware (h100-sxm, h100-sxm-500w, h200, h800, a100, b200, gb200, cpu-here) or a YAML file");
  command->add_flag("--search", args->request.search, "Also rank the layouts that fit, fastest first");
  command->add_option("--expert-load-ratio", args->expert_load_ratio,
                      "The busiest expert's routed tokens over the mean, as a run's metrics report it "
                      "(moe.load_ratio); under expert parallelism the step waits for its rank (default 1: balanced)")
      ->check(CLI::Range(1.0, 1e6));
  command->add_option("--top", args->request.top, "Layouts --search prints")->check(CLI::Range(1, 50));
  command->get_option("recipe")->required(false);
  command->add_option("--validate", args->published,
                      "Plan each run of a published-runs file (tests/data/plan/published.yaml) instead of RECIPE and "
                      "print predicted against published; exit 1 when a run that is not a calibration row misses")
      ->excludes(command->get_option("recipe"));
  command->add_option("--max-error", args->max_error_percent, "--validate: the error allowed, percent")
      ->check(CLI::Range(0.0, 1000.0));
  command->add_option("--run", args->run_name, "--validate: print this run's whole plan instead of the table");
  command->add_option("--holdout-source", args->holdout_source,
                      "--validate: fit the profiles' efficiencies on every other source_id's runs and print this "
                      "source's errors (all: every source in turn); exit 1 when one misses --max-error");
  command->add_flag("--fit", args->fit, "--validate: fit the efficiencies on the calibration rows and print them");
  return {command, [args] {
            if (!args->published.empty())
              return check_published_runs(args->published, args->max_error_percent, args->run_name,
                                          args->holdout_source, args->fit);
            if (args->recipe.path.empty()) throw InputError("plan: give a RECIPE (or --validate FILE)");
            const auto recipe = args->recipe.load();
            auto census = train::model_census(recipe);
            census.expert_load_ratio = args->expert_load_ratio;
            return plan::print_plan(census, recipe, args->request) ? 0 : 3;
          }};
}

Command add_validate(CLI::App& app) {
  auto args = storage<RecipeArgs>();
  auto* command = app.add_subcommand("validate", "Check a recipe and print it fully resolved");
  args->declare(command);
  auto micro_batches = storage<int64_t>();
  command->add_option("--print-schedule", *micro_batches,
                      "Print instead each pipeline rank's order of forwards and backwards (parallel.pp_schedule) "
                      "on this many micro batches");
  return {command, [args, micro_batches] {
            const auto recipe = args->load();
            if (*micro_batches > 0) {
              const auto& p = recipe.parallel;
              fmt::print("{}", config::format_pipeline_actions(p.pp_schedule, p.pp, p.pp_virtual_stages, *micro_batches));
              return 0;
            }
            fmt::print("{}", config::dump_recipe(recipe));
            fmt::print("{}\n", parameter_summary(recipe));
            return 0;
          }};
}

Command add_eval(CLI::App& app, char** argv) {
  auto [command, args] = add_recipe_command<std::string>(
      app, "eval", "Loss and perplexity of a checkpoint on the recipe's eval data");
  command->add_option("--checkpoint", args->options, "Checkpoint folder (default: the run's latest)");
  return {command, [args = args, argv] {
            auto recipe = args->recipe.load();
            apply_omp_wait_policy(recipe, argv);
            return train::evaluate_checkpoint(recipe, args->options);
          }};
}

int run_generate(const std::string& dir, const train::PromptRequest& request, train::GenerateOptions options) {
  const auto check = ckpt::verify_checkpoint(dir);
  if (check.status == ckpt::ManifestCheck::Status::no_manifest) fmt::print(stderr, "notice: {}: {}\n", dir, check.summary());
  auto model = ckpt::load_hf_folder(dir);
  const auto& capabilities = model::model_spec(model->config().family).capabilities;
  if (capabilities.image_classes)
    throw InputError(fmt::format("{}: a {} checkpoint is an image classifier, which labels images and does not "
                                 "generate text; xtrain eval scores it",
                                 dir, model->config().family));
  if (capabilities.contrastive)
    throw InputError(fmt::format("{}: a {} checkpoint scores images against captions and does not generate text; "
                                 "transformers' CLIPModel scores its export",
                                 dir, model->config().family));
  if (capabilities.encoder_decoder)
    throw InputError(fmt::format("{}: a {} checkpoint is an encoder-decoder, and xtrain generates with decoders "
                                 "only so far; xtrain eval scores it, and transformers generates from its export",
                                 dir, model->config().family));
  if (!capabilities.causal)
    throw InputError(fmt::format("{}: a {} checkpoint is an encoder, which predicts masked tokens and does not "
                                 "generate text; xtrain eval scores it",
                                 dir, model->config().family));
  std::vector<std::pair<std::string, torch::Tensor>> named;
  for (const auto& item : model->named_parameters()) named.emplace_back(item.key(), item.value());
  train::require_finite_weights(named, dir);
  const auto spec = train::checkpoint_data_spec(dir);
  auto tokenizer = text::make_tokenizer(spec.tokenizer);
  const auto prompt = train::make_generate_prompt(model->config(), *tokenizer, spec, request, options);
  if (!request.chat) fmt::print("{}", request.text);
  std::fflush(stdout);
  train::generate(*model, *tokenizer, prompt, options, [](const std::string& text) {
    fmt::print("{}", text);
    std::fflush(stdout);
  });
  fmt::print("\n");
  return 0;
}

Command add_generate(CLI::App& app) {
  struct Args {
    std::string checkpoint;
    train::PromptRequest prompt;
    train::GenerateOptions options;
  };
  auto args = storage<Args>();
  auto* command = app.add_subcommand("generate", "Generate text from a checkpoint");
  command->add_option("checkpoint", args->checkpoint, "Checkpoint folder (config.json + model.safetensors)")
      ->required();
  command->add_option("--prompt", args->prompt.text, "Text to continue (with --chat: the user's message)");
  command->add_option("--image", args->prompt.images,
                      "Image file for a llava checkpoint, one per <image> in the prompt (placed first when the "
                      "prompt has none; repeatable)");
  command->add_flag("--chat", args->prompt.chat,
                    "Write the prompt as a user turn with the checkpoint's chat template, answer as the "
                    "assistant, and stop at the end of its turn; prints the answer only");
  command->add_option("--max-new-tokens", args->options.max_new_tokens, "Tokens to generate")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  command->add_option("--temperature", args->options.temperature, "Sampling temperature; 0 is greedy")
      ->check(CLI::Range(0.0, 100.0));
  command->add_option("--top-k", args->options.top_k, "Sample among the k likeliest tokens; 0 keeps all")
      ->check(CLI::NonNegativeNumber);
  command->add_option("--seed", args->options.seed, "Sampling seed");
  return {command, [args] { return run_generate(args->checkpoint, args->prompt, args->options); }};
}

int run_export(const std::string& checkpoint, const std::string& out, const std::string& max_shard_size,
               bool overwrite, ckpt::AdapterExport adapter) {
  const auto check = ckpt::verify_checkpoint(checkpoint);
  std::vector<ckpt::ExtraFile> extra_files;
  const auto spec = train::checkpoint_data_spec(checkpoint);
  for (const auto& file : text::hf_tokenizer_files(spec.tokenizer)) extra_files.push_back({file.source, file.name});
  if (!spec.image_processor.empty()) extra_files.push_back({spec.image_processor, "preprocessor_config.json"});
  if (!spec.generation_config.empty()) extra_files.push_back({spec.generation_config, "generation_config.json"});
  const auto shard_bytes = ckpt::parse_shard_size(max_shard_size);
  if (!shard_bytes)
    throw InputError(fmt::format("--max-shard-size {}: expected a size such as 5GB, 200MB, 100KB or a number of "
                                 "bytes",
                                 max_shard_size));
  if (adapter.base_model.empty()) adapter.base_model = spec.base_model;
  const int64_t tensors = ckpt::export_hf_folder(checkpoint, out, extra_files, *shard_bytes, overwrite, adapter);
  fmt::print("exported {} {}tensors from {} ({}) to {}\n", tensors, adapter.adapter_only ? "adapter " : "", checkpoint,
             check.summary(), out);
  return 0;
}

Command add_export(CLI::App& app) {
  struct Args {
    std::string checkpoint, out, max_shard_size = "5GB";
    bool overwrite = false;
    ckpt::AdapterExport adapter;
  };
  auto args = storage<Args>();
  auto* command = app.add_subcommand(
      "export", "Write a checkpoint (single-process or sharded) as one Hugging Face folder: config.json, "
                "generation_config.json, the weights (model.safetensors, or files and their index above "
                "--max-shard-size) and the tokenizer's files");
  command->add_option("checkpoint", args->checkpoint, "Checkpoint folder (e.g. runs/NAME/checkpoints/latest)")
      ->required();
  command->add_option("out", args->out, "Output folder")->required();
  command->add_option("--max-shard-size", args->max_shard_size,
                      "Split the weights over files of at most this size, with model.safetensors.index.json "
                      "(5GB, 200MB, 100KB or bytes; default 5GB, as save_pretrained)");
  command->add_flag("--overwrite", args->overwrite,
                    "Export into a non-empty folder: replace the files export writes, keep the others");
  command->add_flag("--adapter", args->adapter.adapter_only,
                    "A LoRA checkpoint's adapters alone, as PEFT saves them (adapter_config.json, "
                    "adapter_model.safetensors); without it a LoRA checkpoint is exported merged, W + (alpha/r) B A");
  command->add_option("--base-model", args->adapter.base_model,
                      "--adapter: the base_model_name_or_path to write (default: the run's model.init_from folder)");
  return {command, [args] {
            return run_export(args->checkpoint, args->out, args->max_shard_size, args->overwrite, args->adapter);
          }};
}

// The whole input is one document, as a data.train text file is; ids go on one line.
int run_tokenize(const std::string& spec, const std::string& input, bool count_only) {
  auto tokenizer = text::make_tokenizer(spec);
  const std::string text = util::read_file(input.empty() || input == "-" ? "/dev/stdin" : input);
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int64_t> ids = tokenizer->encode(text);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (count_only) {
    fmt::print("{}\n", ids.size());
    fmt::print(stderr, "{} bytes -> {} ids in {:.3f} s ({:.2f} M ids/s, {:.1f} MB/s)\n", text.size(), ids.size(),
               seconds, ids.size() / seconds / 1e6, text.size() / seconds / 1e6);
    return 0;
  }
  fmt::memory_buffer out;
  for (size_t i = 0; i < ids.size(); ++i) fmt::format_to(std::back_inserter(out), i ? " {}" : "{}", ids[i]);
  out.push_back('\n');
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

Command add_tokenize(CLI::App& app) {
  struct Args {
    std::string tokenizer = "byte", input;
    CLI::Option* count = nullptr;
  };
  auto args = storage<Args>();
  auto* command = app.add_subcommand("tokenize", "Print the token ids of a text as one document, on one line");
  command->add_option("--tokenizer", args->tokenizer, "Tokenizer, as the recipe key data.tokenizer")
      ->capture_default_str();
  command->add_option("--input", args->input, "Text file (default: standard input)");
  auto* ids = command->add_flag("--ids", "Print the ids, space-separated (the default)");
  args->count = command->add_flag("--count", "Print the number of ids; the encoding rate goes to standard error");
  args->count->excludes(ids);
  return {command, [args] { return run_tokenize(args->tokenizer, args->input, args->count->count() > 0); }};
}

int run_data_prepare(const data::PrepareOptions& options) {
  util::ProgressLine progress(stderr);
  const auto result = data::prepare_indexed_dataset(options, &progress);
  fmt::print("wrote {0}.idx + {0}.bin: {1} documents, {2} tokens ({3}) from {4:.1f} MB in {5:.1f} s "
             "({6:.2f} M tokens/s, {7:.1f} MB/s, {8} workers)\n",
             options.output_prefix, result.documents, result.tokens, data::indexed_dtype_name(result.dtype),
             result.bytes / 1e6, result.seconds, result.tokens / result.seconds / 1e6,
             result.bytes / 1e6 / result.seconds, result.workers);
  if (result.loss_mask) fmt::print("loss mask: {0}.loss_mask.idx + {0}.loss_mask.bin\n", options.output_prefix);
  // The files are complete and synced. LibTorch's static destructors, which deregister every
  // operator, would take a fifth of a short run's time (measured with perf), and nothing here
  // needs them.
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(0);
}

Command add_data_prepare(CLI::App& data) {
  auto options = storage<data::PrepareOptions>();
  auto* command = data.add_subcommand("prepare",
                                      "Tokenize text or JSONL files into a Megatron indexed dataset PREFIX.idx + "
                                      "PREFIX.bin (data.train: megatron:PREFIX)");
  command->add_option("--tokenizer", options->tokenizer, "Tokenizer, as the recipe key data.tokenizer")->required();
  command->add_option("--input", options->inputs, "Input files, read in the order given")->required();
  command->add_option("--output", options->output_prefix, "Output path prefix (without .idx / .bin)")->required();
  command->add_option("--workers", options->workers, "Tokenizing threads; 0 means one per core")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  command
      ->add_option("--format", options->format,
                   "auto (.jsonl: records with \"text\" or \"messages\"; other files: one document each), text, "
                   "jsonl or chat")
      ->check(CLI::IsMember({"auto", "text", "jsonl", "chat"}))
      ->capture_default_str();
  command
      ->add_option("--chat-template", options->chat_template,
                   "How conversations are written, as the recipe key data.chat_template")
      ->capture_default_str();
  return {command, [options] { return run_data_prepare(*options); }};
}

Command add_data_balance(CLI::App& data) {
  auto [command, args] = add_recipe_command<train::BalanceReportOptions>(
      data, "balance",
      "How evenly a recipe's data spreads attention cost over data-parallel ranks, without and with "
      "data.balance_window");
  command->add_option("--ranks", args->options.ranks, "Data-parallel rank counts to compare")
      ->delimiter(',')
      ->capture_default_str();
  command->add_option("--steps", args->options.steps, "Steps to measure; 0 means train.steps, at most 256")
      ->check(CLI::NonNegativeNumber);
  return {command, [args = args] { return train::report_balance(args->recipe.load(), args->options); }};
}

Command add_data_batch(CLI::App& data) {
  auto [command, args] = add_recipe_command<train::BatchDumpOptions>(
      data, "batch",
      "Write samples as the recipe's model reads them (masked for data.objective mlm) to a safetensors file: "
      "input_ids, labels, attention_mask");
  command->add_option("--split", args->options.split, "eval (data.eval) or train (data.train, unshuffled)")
      ->check(CLI::IsMember({"eval", "train"}))
      ->capture_default_str();
  command->add_option("--first", args->options.first, "First sample")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command->add_option("--count", args->options.count, "Samples")->check(CLI::PositiveNumber)->capture_default_str();
  command->add_option("--out", args->options.out, "Output .safetensors file")->required();
  return {command, [args = args] { return train::dump_batch(args->recipe.load(), args->options); }};
}

Command add_launch(CLI::App& app, launch::LaunchOptions& options) {
  auto* command = app.add_subcommand(
      "launch", "Run a command as N ranks per node with torchrun's environment: launch [options] -- train RECIPE");
  command->add_option("--nproc-per-node,--nproc_per_node", options.nproc_per_node, "Ranks on this node")->required();
  // Read when the command runs, so that a malformed value is the usual input error (exit 2).
  auto nnodes = std::make_shared<std::string>("1");
  command
      ->add_option("--nnodes", *nnodes,
                   "Nodes in the job: N, or MIN:MAX (torchrun's form) for a job that restarts on at least MIN "
                   "nodes when nodes are lost")
      ->capture_default_str();
  command->add_option("--active-nodes", options.active_nodes,
                      "Nodes that run ranks at once (default: MAX); the others wait as hot spares and take a lost "
                      "node's place");
  command->add_option("--heartbeat", options.heartbeat_s,
                      "Seconds between the launchers' heartbeats; 3 missed ones lose a node")
      ->capture_default_str();
  command->add_option("--node-rank,--node_rank", options.node_rank, "This node's index, 0..nnodes-1")
      ->capture_default_str();
  command->add_option("--master-addr,--master_addr", options.master_addr, "Host of rank 0 (and node 0)")
      ->capture_default_str();
  command->add_option("--master-port,--master_port", options.master_port,
                      "Port of rank 0's store; the launchers use the next one (default: a free port on one "
                      "node, 29500 on several)");
  command
      ->add_option("--max-restarts,--max_restarts", options.max_restarts,
                   "Restart every rank this many times after a failure")
      ->capture_default_str();
  command->add_option("--log-dir,--log_dir", options.log_dir, "Write each rank's output to DIR/attempt_K/rank_R.log");
  command->add_option("--program", options.program, "Run this executable instead of xtrain (like torchrun --no-python)");
  command->add_option("--run-id,--run_id", options.run_id, "Job id for TORCHELASTIC_RUN_ID");
  command->add_option("--join-timeout", options.join_timeout_s, "Seconds to wait for every node to join")
      ->capture_default_str();
  return {command, [&options, nnodes] {
            launch::parse_nnodes(*nnodes, options);
            return launch::run_launch(options, parallel::connect_tcp_agent_store);
          }};
}

// What a run's time went to, read from its own records.
Command add_goodput(CLI::App& app) {
  auto* command = app.add_subcommand(
      "goodput", "Wall time, productive step time and the time each interruption cost, from a run's records; "
      "and whether every step read the data an uninterrupted run would (exit 1 if not)");
  auto run_dir = std::make_shared<std::string>();
  command->add_option("run_dir", *run_dir, "The run's folder (run.dir)")->required();
  return {command, [run_dir] {
            fmt::print("{}", launch::goodput_report(*run_dir, launch::measure_goodput(*run_dir)));
            // Data skipped or read twice is a fault of the run, not of its records: exit 1.
            const auto positions = launch::check_data_positions(*run_dir);
            fmt::print("{}", launch::data_positions_report(positions));
            return positions.faults.empty() ? 0 : 1;
          }};
}

int run_env() {
  fmt::print("{}\n", version_text());
  fmt::print("libtorch: {} from {}\n", TORCH_VERSION, XTRAIN_TORCH_SOURCE);
  fmt::print("cuda: {}\n", util::cuda_compiled() ? fmt::format("{} compiled, {} device(s) visible",
                                                                util::cuda_compiled_version(), util::cuda_device_count())
                                                  : "not compiled");
  fmt::print("threads: {}\n", torch::get_num_threads());
  fmt::print("blas: {} (LibTorch build configuration)\n", util::blas_library());
  for (const auto& [name, dtype] : {std::pair{"fp32", torch::kFloat32}, std::pair{"bf16", torch::kBFloat16}}) {
    const auto rate = util::measure_matmul_rate(dtype);
    fmt::print("{} matmul {}^3: {:.1f} GFLOP/s\n", name, rate.n, rate.gflops);
  }
  return 0;
}

}  // namespace

std::string version_text() {
  return fmt::format("xtrain {} ({}; {} build)", XTRAIN_VERSION, util::describe_runtime(), XTRAIN_BUILD_TYPE);
}

std::vector<Command> add_commands(CLI::App& app, launch::LaunchOptions& launch_options, char** argv) {
  std::vector<Command> commands{add_train(app, argv), add_validate(app), add_health(app), add_plan(app), add_eval(app, argv),
                                add_generate(app),
                                add_export(app), add_tokenize(app)};
  auto* data = app.add_subcommand("data", "Data tools: prepare, balance, batch, cache");
  data->require_subcommand(1);
  commands.push_back(add_data_prepare(*data));
  commands.push_back(add_data_balance(*data));
  commands.push_back(add_data_batch(*data));
  for (auto& command : add_data_cache(*data)) commands.push_back(std::move(command));
  commands.push_back(add_launch(app, launch_options));
  commands.push_back(add_goodput(app));
  commands.push_back({app.add_subcommand("options", "Print every recipe key as a Markdown table"), [] {
                        fmt::print("{}", config::options_markdown());
                        return 0;
                      }});
  commands.push_back({app.add_subcommand("env", "Show versions, threads, the BLAS in use and its matmul rate"), run_env});
  return commands;
}

}  // namespace xtrain::cli
