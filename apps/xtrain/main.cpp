// xtrain command line: parses arguments and dispatches to the engine. Exit codes: 0 success,
// 2 bad input (recipe, arguments, files), 1 runtime failure.
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <torch/torch.h>

#include "ckpt/hf_llama.h"
#include "config/recipe_loader.h"
#include "data/tokenizer.h"
#include "launch/error_file.h"
#include "train/generate.h"
#include "train/trainer.h"
#include "util/blas_probe.h"
#include "util/build_info.h"
#include "util/input_error.h"
#include "util/durable_file.h"

namespace {

using namespace xtrain;

constexpr int kExitRuntimeFailure = 1;
constexpr int kExitBadInput = 2;

std::string version_text() {
  return fmt::format("xtrain {} (LibTorch {}, {} build)", XTRAIN_VERSION, TORCH_VERSION, XTRAIN_BUILD_TYPE);
}

// The tokenizer a checkpoint was trained with, from the recipe copy saved beside it.
std::string checkpoint_tokenizer(const std::string& dir) {
  config::LoadOptions options;
  options.check_files = false;
  try {
    return config::load_recipe_text(util::read_file(dir + "/recipe.yaml"), dir + "/recipe.yaml", options)
        .data.tokenizer;
  } catch (const InputError&) {
    return "byte";  // a plain HF folder without xtrain's recipe copy
  }
}

int run_generate(const std::string& dir, const std::string& prompt, const train::GenerateOptions& options) {
  auto model = ckpt::load_hf_folder(dir);
  auto tokenizer = data::make_tokenizer(checkpoint_tokenizer(dir));
  fmt::print("{}", prompt);
  std::fflush(stdout);
  train::generate(model, *tokenizer, prompt, options, [](const std::string& text) {
    fmt::print("{}", text);
    std::fflush(stdout);
  });
  fmt::print("\n");
  return 0;
}

int run_env() {
  util::warn_if_slow_blas();
  auto blas = util::loaded_blas();
  fmt::print("{}\n", version_text());
  fmt::print("threads: {}\n", torch::get_num_threads());
  fmt::print("blas: {} ({})\n", blas.library.empty() ? "none mapped" : blas.library,
             blas.optimized ? "optimized" : "reference implementation: slow");
  fmt::print("fp32 matmul 1024^3: {:.1f} GFLOP/s\n", util::measure_matmul_gflops(1024, 5, torch::kFloat32));
  fmt::print("bf16 matmul 1024^3: {:.1f} GFLOP/s\n", util::measure_matmul_gflops(1024, 5, torch::kBFloat16));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"xtrain: train transformer models from YAML recipes"};
  app.require_subcommand(1);
  app.set_version_flag("--version", version_text());

  std::string recipe_path, checkpoint_dir, prompt;
  std::vector<std::string> overrides;
  int64_t stop_at_step = 0;
  train::GenerateOptions generate_options;

  auto* train_cmd = app.add_subcommand("train", "Train (or resume training) a model from a recipe");
  train_cmd->add_option("recipe", recipe_path, "Recipe YAML file")->required();
  train_cmd->add_option("--set", overrides, "Override a recipe key: key.path=value (repeatable)");
  train_cmd->add_option("--stop-at-step", stop_at_step,
                        "End cleanly after step N with a checkpoint; the same command resumes later");

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
  generate_cmd->add_option("--prompt", prompt, "Text to continue");
  generate_cmd->add_option("--max-new-tokens", generate_options.max_new_tokens, "Tokens to generate")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  generate_cmd->add_option("--temperature", generate_options.temperature, "Sampling temperature; 0 is greedy")
      ->check(CLI::Range(0.0, 100.0));
  generate_cmd->add_option("--top-k", generate_options.top_k, "Sample among the k likeliest tokens; 0 keeps all")
      ->check(CLI::NonNegativeNumber);
  generate_cmd->add_option("--seed", generate_options.seed, "Sampling seed");

  auto* options_cmd = app.add_subcommand("options", "Print every recipe key as a Markdown table");
  auto* env_cmd = app.add_subcommand("env", "Show versions, threads, the BLAS in use and its matmul rate");

  try {
    app.parse(argc, argv);
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
      return train::train(recipe, {stop_at_step});
    }
    if (*validate_cmd) {
      auto recipe = config::load_recipe(recipe_path, load_options);
      fmt::print("{}", config::dump_recipe(recipe));
      return 0;
    }
    if (*eval_cmd) {
      auto recipe = config::load_recipe(recipe_path, load_options);
      return train::evaluate_checkpoint(recipe, checkpoint_dir);
    }
    if (*generate_cmd) return run_generate(checkpoint_dir, prompt, generate_options);
    if (*options_cmd) {
      fmt::print("{}", config::options_markdown());
      return 0;
    }
    if (*env_cmd) return run_env();
  } catch (const InputError& e) {
    fmt::print(stderr, "{}\n", e.what());
    // Under a launcher, the failure report shows this message (torchelastic's error file).
    launch::record_error_if_requested(launch::error_record(e));
    return kExitBadInput;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    launch::record_error_if_requested(launch::error_record(e));
    return kExitRuntimeFailure;
  }
  return kExitRuntimeFailure;
}
