// Rollout throughput of the batched sampler with its key/value cache (train/rollout_sampler.h)
// on a Hugging Face folder: B prompts of P random ids, N new tokens each (temperature 1, no stop
// ids, so every row runs to N), after one short warm-up. scripts/bench/rollout.sh runs it
// beside transformers' generate on the same folder.
#include <cstdint>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <torch/torch.h>

#include "ckpt/hf_folder.h"
#include "train/rollout_sampler.h"

using namespace xtrain;

int main(int argc, char** argv) {
  CLI::App app{"Rollout tokens/s of xtrain's batched sampler"};
  std::string model_dir;
  int64_t batch = 16, prompt_tokens = 32, new_tokens = 64, threads = 1;
  uint64_t seed = 3;
  app.add_option("--model", model_dir, "Hugging Face folder")->required();
  app.add_option("--batch", batch, "Prompts");
  app.add_option("--prompt-tokens", prompt_tokens, "Tokens per prompt");
  app.add_option("--new-tokens", new_tokens, "Tokens generated per prompt");
  app.add_option("--threads", threads, "torch threads");
  app.add_option("--seed", seed, "Seed of the prompts and the sampling");
  CLI11_PARSE(app, argc, argv);
  torch::set_num_threads(static_cast<int>(threads));
  auto model = ckpt::load_hf_folder(model_dir);
  auto generator = at::detail::createCPUGenerator(seed);
  const auto ids = torch::randint(1, model->config().vocab_size, {batch, prompt_tokens}, generator, torch::kInt64);
  std::vector<std::vector<int64_t>> prompts;
  for (int64_t row = 0; row < batch; ++row) {
    const auto r = ids[row].contiguous();
    prompts.emplace_back(r.data_ptr<int64_t>(), r.data_ptr<int64_t>() + prompt_tokens);
  }
  train::SamplingOptions options;
  options.temperature = 1.0;
  options.seed = seed;
  options.max_new_tokens = 4;
  train::sample_rollouts(*model, {prompts[0]}, options);  // warm-up
  options.max_new_tokens = new_tokens;
  const auto rollouts = train::sample_rollouts(*model, prompts, options);
  fmt::print("xtrain: {} tokens in {:.3f} s\n", rollouts.generated_tokens, rollouts.seconds);
  return 0;
}
