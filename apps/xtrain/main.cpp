// xtrain command line: parses arguments and dispatches to the engine. Exit codes: 0 success,
// 2 bad input (recipe, arguments, files), 1 runtime failure.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <torch/torch.h>

#include "ckpt/checkpoint.h"
#include "ckpt/checkpoint_export.h"
#include "train/model_factory.h"
#include "ckpt/hf_folder.h"
#include "config/recipe_loader.h"
#include "data/data_prepare.h"
#include "data/tokenizer.h"
#include "parallel/comm.h"
#include "launch/error_file.h"
#include "launch/launcher.h"
#include "host_allocator.h"
#include "omp_wait_policy.h"
#include "train/balance_report.h"
#include "train/batch_dump.h"
#include "train/generate.h"
#include "train/generate_prompt.h"
#include "train/non_finite_guard.h"
#include "train/trainer.h"
#include "util/blas_probe.h"
#include "util/build_info.h"
#include "util/exit_codes.h"
#include "util/input_error.h"
#include "util/durable_file.h"
#include "util/device.h"
#include "util/progress_line.h"

namespace {

using namespace xtrain;

std::string version_text() {
  return fmt::format("xtrain {} ({}; {} build)", XTRAIN_VERSION, util::describe_runtime(), XTRAIN_BUILD_TYPE);
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

int run_generate(const std::string& dir, const train::PromptRequest& request, train::GenerateOptions options) {
  const auto check = ckpt::verify_checkpoint(dir);
  if (check.status == ckpt::ManifestCheck::Status::no_manifest) fmt::print(stderr, "notice: {}: {}\n", dir, check.summary());
  auto model = ckpt::load_hf_folder(dir);
  if (model->config().family == "bert")
    throw InputError(fmt::format("{}: a bert checkpoint is an encoder, which predicts masked tokens and does not "
                                 "generate text; xtrain eval scores it",
                                 dir));
  std::vector<std::pair<std::string, torch::Tensor>> named;
  for (const auto& item : model->named_parameters()) named.emplace_back(item.key(), item.value());
  train::require_finite_weights(named, dir);
  const auto spec = train::checkpoint_data_spec(dir);
  auto tokenizer = data::make_tokenizer(spec.tokenizer);
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

// The whole input is one document, as a data.train text file is; ids go on one line.
int run_tokenize(const std::string& spec, const std::string& input, bool count_only) {
  auto tokenizer = data::make_tokenizer(spec);
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

int run_env() {
  fmt::print("{}\n", version_text());
  fmt::print("libtorch: {} from {}\n", TORCH_VERSION, XTRAIN_TORCH_SOURCE);
  fmt::print("cuda: {}\n", util::cuda_compiled() ? fmt::format("{} compiled, {} device(s) visible",
                                                                util::cuda_compiled_version(), util::cuda_device_count())
                                                  : "not compiled");
  fmt::print("threads: {}\n", torch::get_num_threads());
  fmt::print("blas: {} (LibTorch build configuration)\n", util::blas_library());
  fmt::print("fp32 matmul 1024^3: {:.1f} GFLOP/s\n", util::measure_matmul_gflops(1024, 5, torch::kFloat32));
  fmt::print("bf16 matmul 1024^3: {:.1f} GFLOP/s\n", util::measure_matmul_gflops(1024, 5, torch::kBFloat16));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  keep_freed_host_memory();
  // A collective that failed or timed out ends the process at once, reported like any error:
  // unwinding would wait on process groups whose peer is gone.
  parallel::set_collective_failure_handler([](const std::string& message) {
    fmt::print(stderr, "error: {}\n", message);
    launch::record_error_if_requested(launch::error_record("CommError", message));
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(kExitRuntimeFailure);
  });
  // `xtrain launch [options] -- command...`: what follows the first `--` is the ranks'
  // command line, kept away from CLI11 so that its options are not taken for launch's.
  launch::LaunchOptions launch_options;
  int parsed_argc = argc;
  if (argc > 1 && std::string(argv[1]) == "launch") {
    for (int i = 2; i < argc; ++i)
      if (std::string(argv[i]) == "--") {
        launch_options.command.assign(argv + i + 1, argv + argc);
        launch_options.command_given = true;
        parsed_argc = i;
        break;
      }
  }

  CLI::App app{"xtrain: train transformer models from YAML recipes"};
  app.require_subcommand(1);
  app.set_version_flag("--version", version_text());

  std::string recipe_path, checkpoint_dir, tokenizer_spec = "byte", tokenize_input;
  std::vector<std::string> overrides;
  int64_t stop_at_step = 0;
  std::vector<std::string> allow_changed;
  bool setup_only = false;
  train::GenerateOptions generate_options;

  auto* train_cmd = app.add_subcommand("train", "Train (or resume training) a model from a recipe");
  train_cmd->add_option("recipe", recipe_path, "Recipe YAML file")->required();
  train_cmd->add_option("--set", overrides, "Override a recipe key: key.path=value (repeatable)");
  train_cmd->add_option("--stop-at-step", stop_at_step,
                        "End cleanly after step N with a checkpoint; the same command resumes later");
  train_cmd->add_option("--allow-changed", allow_changed,
                        "Resume although this recipe key (data order or batch geometry) differs from the "
                        "checkpoint's run (repeatable)");
  train_cmd->add_flag("--setup-only", setup_only,
                      "Set up the run (data, mesh, model materialised and sharded, optimizer, checkpoint) and report "
                      "its memory, then exit 0 without training or writing anything");

  auto* validate_cmd = app.add_subcommand("validate", "Check a recipe and print it fully resolved");
  validate_cmd->add_option("recipe", recipe_path, "Recipe YAML file")->required();
  validate_cmd->add_option("--set", overrides, "Override a recipe key: key.path=value (repeatable)");

  auto* eval_cmd = app.add_subcommand("eval", "Loss and perplexity of a checkpoint on the recipe's eval data");
  eval_cmd->add_option("recipe", recipe_path, "Recipe YAML file")->required();
  eval_cmd->add_option("--set", overrides, "Override a recipe key: key.path=value (repeatable)");
  eval_cmd->add_option("--checkpoint", checkpoint_dir, "Checkpoint folder (default: the run's latest)");

  auto* generate_cmd = app.add_subcommand("generate", "Generate text from a checkpoint");
  generate_cmd->add_option("checkpoint", checkpoint_dir, "Checkpoint folder (config.json + model.safetensors)")
      ->required();
  train::PromptRequest prompt_request;
  generate_cmd->add_option("--prompt", prompt_request.text, "Text to continue (with --chat: the user's message)");
  generate_cmd->add_option("--image", prompt_request.images,
                           "Image file for a llava checkpoint, one per <image> in the prompt (placed first when the "
                           "prompt has none; repeatable)");
  generate_cmd->add_flag("--chat", prompt_request.chat,
                         "Write the prompt as a user turn with the checkpoint's chat template, answer as the "
                         "assistant, and stop at the end of its turn; prints the answer only");
  generate_cmd->add_option("--max-new-tokens", generate_options.max_new_tokens, "Tokens to generate")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  generate_cmd->add_option("--temperature", generate_options.temperature, "Sampling temperature; 0 is greedy")
      ->check(CLI::Range(0.0, 100.0));
  generate_cmd->add_option("--top-k", generate_options.top_k, "Sample among the k likeliest tokens; 0 keeps all")
      ->check(CLI::NonNegativeNumber);
  generate_cmd->add_option("--seed", generate_options.seed, "Sampling seed");

  std::string export_out;
  auto* export_cmd = app.add_subcommand(
      "export", "Write a checkpoint (single-process or sharded) as one Hugging Face folder: config.json, "
      "generation_config.json, the weights (model.safetensors, or files and their index above --max-shard-size) "
      "and the tokenizer's files");
  export_cmd->add_option("checkpoint", checkpoint_dir, "Checkpoint folder (e.g. runs/NAME/checkpoints/latest)")->required();
  export_cmd->add_option("out", export_out, "Output folder")->required();
  std::string max_shard_size = "5GB";
  export_cmd->add_option("--max-shard-size", max_shard_size,
                         "Split the weights over files of at most this size, with model.safetensors.index.json "
                         "(5GB, 200MB, 100KB or bytes; default 5GB, as save_pretrained)");

  auto* tokenize_cmd = app.add_subcommand("tokenize", "Print the token ids of a text as one document, on one line");
  tokenize_cmd->add_option("--tokenizer", tokenizer_spec, "Tokenizer, as the recipe key data.tokenizer")
      ->capture_default_str();
  tokenize_cmd->add_option("--input", tokenize_input, "Text file (default: standard input)");
  auto* ids_flag = tokenize_cmd->add_flag("--ids", "Print the ids, space-separated (the default)");
  auto* count_flag =
      tokenize_cmd->add_flag("--count", "Print the number of ids; the encoding rate goes to standard error");
  count_flag->excludes(ids_flag);

  data::PrepareOptions prepare_options;
  auto* data_cmd = app.add_subcommand("data", "Data tools: prepare, balance, batch");
  data_cmd->require_subcommand(1);
  auto* prepare_cmd = data_cmd->add_subcommand(
      "prepare", "Tokenize text or JSONL files into a Megatron indexed dataset PREFIX.idx + PREFIX.bin (data.train: megatron:PREFIX)");
  prepare_cmd->add_option("--tokenizer", prepare_options.tokenizer, "Tokenizer, as the recipe key data.tokenizer")
      ->required();
  prepare_cmd->add_option("--input", prepare_options.inputs, "Input files, read in the order given")->required();
  prepare_cmd->add_option("--output", prepare_options.output_prefix, "Output path prefix (without .idx / .bin)")
      ->required();
  prepare_cmd->add_option("--workers", prepare_options.workers, "Tokenizing threads; 0 means one per core")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  prepare_cmd
      ->add_option("--format", prepare_options.format,
                   "auto (.jsonl: records with \"text\" or \"messages\"; other files: one document each), text, "
                   "jsonl or chat")
      ->check(CLI::IsMember({"auto", "text", "jsonl", "chat"}))
      ->capture_default_str();
  prepare_cmd
      ->add_option("--chat-template", prepare_options.chat_template,
                   "How conversations are written, as the recipe key data.chat_template")
      ->capture_default_str();

  train::BalanceReportOptions balance_options;
  auto* balance_cmd = data_cmd->add_subcommand(
      "balance", "How evenly a recipe's data spreads attention cost over data-parallel ranks, without and with "
                 "data.balance_window");
  balance_cmd->add_option("recipe", recipe_path, "Recipe YAML file")->required();
  balance_cmd->add_option("--set", overrides, "Override a recipe key: key.path=value (repeatable)");
  balance_cmd->add_option("--ranks", balance_options.ranks, "Data-parallel rank counts to compare")
      ->delimiter(',')
      ->capture_default_str();
  balance_cmd->add_option("--steps", balance_options.steps, "Steps to measure; 0 means train.steps, at most 256")
      ->check(CLI::NonNegativeNumber);

  train::BatchDumpOptions batch_options;
  auto* batch_cmd = data_cmd->add_subcommand(
      "batch", "Write samples as the recipe's model reads them (masked for data.objective mlm) to a safetensors "
               "file: input_ids, labels, attention_mask");
  batch_cmd->add_option("recipe", recipe_path, "Recipe YAML file")->required();
  batch_cmd->add_option("--set", overrides, "Override a recipe key: key.path=value (repeatable)");
  batch_cmd->add_option("--split", batch_options.split, "eval (data.eval) or train (data.train, unshuffled)")
      ->check(CLI::IsMember({"eval", "train"}))
      ->capture_default_str();
  batch_cmd->add_option("--first", batch_options.first, "First sample")->check(CLI::NonNegativeNumber)->capture_default_str();
  batch_cmd->add_option("--count", batch_options.count, "Samples")->check(CLI::PositiveNumber)->capture_default_str();
  batch_cmd->add_option("--out", batch_options.out, "Output .safetensors file")->required();

  auto* launch_cmd = app.add_subcommand(
      "launch", "Run a command as N ranks per node with torchrun's environment: launch [options] -- train RECIPE");
  launch_cmd->add_option("--nproc-per-node,--nproc_per_node", launch_options.nproc_per_node, "Ranks on this node")
      ->required();
  launch_cmd->add_option("--nnodes", launch_options.nnodes, "Nodes in the job")->capture_default_str();
  launch_cmd->add_option("--node-rank,--node_rank", launch_options.node_rank, "This node's index, 0..nnodes-1")
      ->capture_default_str();
  launch_cmd->add_option("--master-addr,--master_addr", launch_options.master_addr, "Host of rank 0 (and node 0)")
      ->capture_default_str();
  launch_cmd->add_option("--master-port,--master_port", launch_options.master_port,
                         "Port of rank 0's store; the launchers use the next one (default: a free port on one "
                         "node, 29500 on several)");
  launch_cmd
      ->add_option("--max-restarts,--max_restarts", launch_options.max_restarts,
                   "Restart every rank this many times after a failure")
      ->capture_default_str();
  launch_cmd->add_option("--log-dir,--log_dir", launch_options.log_dir,
                         "Write each rank's output to DIR/attempt_K/rank_R.log");
  launch_cmd->add_option("--program", launch_options.program,
                         "Run this executable instead of xtrain (like torchrun --no-python)");
  launch_cmd->add_option("--run-id,--run_id", launch_options.run_id, "Job id for TORCHELASTIC_RUN_ID");
  launch_cmd->add_option("--join-timeout", launch_options.join_timeout_s, "Seconds to wait for every node to join")
      ->capture_default_str();

  auto* options_cmd = app.add_subcommand("options", "Print every recipe key as a Markdown table");
  auto* env_cmd = app.add_subcommand("env", "Show versions, threads, the BLAS in use and its matmul rate");

  try {
    app.parse(parsed_argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    launch::record_error_if_requested(launch::error_record("ArgumentError", e.what()));
    return kExitBadInput;
  }

  try {
    config::LoadOptions load_options;
    load_options.overrides = overrides;
    if (*train_cmd) {
      auto recipe = config::load_recipe(recipe_path, load_options);
      apply_omp_wait_policy(recipe, argv);
      return train::train(recipe, {stop_at_step, allow_changed, setup_only});
    }
    if (*validate_cmd) {
      auto recipe = config::load_recipe(recipe_path, load_options);
      fmt::print("{}", config::dump_recipe(recipe));
      fmt::print("{}\n", parameter_summary(recipe));
      return 0;
    }
    if (*eval_cmd) {
      auto recipe = config::load_recipe(recipe_path, load_options);
      apply_omp_wait_policy(recipe, argv);
      return train::evaluate_checkpoint(recipe, checkpoint_dir);
    }
    if (*generate_cmd) return run_generate(checkpoint_dir, prompt_request, generate_options);
    if (*export_cmd) {
      const auto check = ckpt::verify_checkpoint(checkpoint_dir);
      std::vector<ckpt::ExtraFile> tokenizer_files;
      const auto spec = train::checkpoint_data_spec(checkpoint_dir);
      for (const auto& file : data::hf_tokenizer_files(spec.tokenizer)) tokenizer_files.push_back({file.source, file.name});
      if (!spec.image_processor.empty()) tokenizer_files.push_back({spec.image_processor, "preprocessor_config.json"});
      const auto shard_bytes = ckpt::parse_shard_size(max_shard_size);
      if (!shard_bytes)
        throw InputError(fmt::format("--max-shard-size {}: expected a size such as 5GB, 200MB, 100KB or a number of "
                                     "bytes", max_shard_size));
      const int64_t tensors = ckpt::export_hf_folder(checkpoint_dir, export_out, tokenizer_files, *shard_bytes);
      fmt::print("exported {} tensors from {} ({}) to {}\n", tensors, checkpoint_dir, check.summary(), export_out);
      return 0;
    }
    if (*prepare_cmd) return run_data_prepare(prepare_options);
    if (*balance_cmd) return train::report_balance(config::load_recipe(recipe_path, load_options), balance_options);
    if (*batch_cmd) return train::dump_batch(config::load_recipe(recipe_path, load_options), batch_options);
    if (*tokenize_cmd) return run_tokenize(tokenizer_spec, tokenize_input, count_flag->count() > 0);
    if (*options_cmd) {
      fmt::print("{}", config::options_markdown());
      return 0;
    }
    if (*env_cmd) return run_env();
    if (*launch_cmd) return launch::run_launch(launch_options);
  } catch (const InputError& e) {
    std::fflush(stdout);  // what the run printed comes before why it ended
    fmt::print(stderr, "{}\n", e.what());
    // Under a launcher, the failure report shows this message (torchelastic's error file).
    launch::record_error_if_requested(launch::error_record(e));
    return kExitBadInput;
  } catch (const c10::Error& e) {
    // LibTorch's own errors carry a C++ stack trace that means nothing to a user.
    std::fflush(stdout);
    fmt::print(stderr, "error: {}\n", e.what_without_backtrace());
    launch::record_error_if_requested(launch::error_record("Error", e.what_without_backtrace()));
    return kExitRuntimeFailure;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "error: {}\n", e.what());
    launch::record_error_if_requested(launch::error_record(e));
    return kExitRuntimeFailure;
  }
  return kExitRuntimeFailure;
}
