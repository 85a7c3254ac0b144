#include "train/rollout_sampler.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>
#include <torch/torch.h>

#include "model/attention/kv_cache.h"

namespace xtrain::train {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

void check_request(const model::CausalLM& model, const std::vector<std::vector<int64_t>>& prompts,
                   const SamplingOptions& options) {
  const auto& config = model.config();
  if (!model.reads_kv_cache())
    throw std::invalid_argument(fmt::format("sample_rollouts: the {} family has no key/value cache; rollouts are "
                                            "sampled for the llama-style decoders (llama, qwen2, qwen3 and their "
                                            "mixtures of experts)",
                                            config.family));
  if (model.tensor_parallel())
    throw std::invalid_argument("sample_rollouts: tensor parallelism (parallel.tp) is not supported for rollouts");
  if (prompts.empty()) throw std::invalid_argument("sample_rollouts: no prompts");
  if (options.max_new_tokens < 1)
    throw std::invalid_argument(fmt::format("sample_rollouts: max_new_tokens must be at least 1, got {}",
                                            options.max_new_tokens));
  if (!(options.temperature >= 0) || !(options.top_p > 0 && options.top_p <= 1) || options.top_k < 0)
    throw std::invalid_argument(fmt::format("sample_rollouts: temperature must be >= 0, top_p in (0, 1] and top_k "
                                            ">= 0, got {}, {} and {}",
                                            options.temperature, options.top_p, options.top_k));
  for (size_t row = 0; row < prompts.size(); ++row) {
    const auto& prompt = prompts[row];
    if (prompt.empty()) throw std::invalid_argument(fmt::format("sample_rollouts: prompt row {} is empty", row));
    for (const auto id : prompt)
      if (id < 0 || id >= config.vocab_size)
        throw std::invalid_argument(fmt::format("sample_rollouts: prompt row {} holds token id {}, outside the "
                                                "vocabulary of {}",
                                                row, id, config.vocab_size));
    // The last token sampled is never fed back.
    const auto longest = static_cast<int64_t>(prompt.size()) + options.max_new_tokens - 1;
    if (longest > config.max_seq_len)
      throw std::invalid_argument(fmt::format("sample_rollouts: prompt row {} of {} tokens plus {} new ones exceeds "
                                              "model.max_seq_len {}",
                                              row, prompt.size(), options.max_new_tokens, config.max_seq_len));
  }
}

// Restores the model's training mode and leaves no-grad on the way out.
struct EvalMode {
  model::CausalLM& model;
  bool was_training;
  torch::NoGradGuard no_grad;
  explicit EvalMode(model::CausalLM& m) : model(m), was_training(m.is_training()) { model.eval(); }
  ~EvalMode() { model.train(was_training); }
};

// The logits [rows, vocab] (fp32, on the host) of each row's last token of this forward.
torch::Tensor last_logits(model::CausalLM& model, const torch::Tensor& ids, const torch::Tensor& real,
                          model::KvCache& cache) {
  cache.begin(real, model.config().max_seq_len);
  model::Batch batch;
  batch.input_ids = ids;
  batch.kv_cache = &cache;
  const auto hidden = model.forward(batch).hidden.select(1, -1);
  return torch::nn::functional::linear(hidden, model.output_weight(), model.output_bias())
      .to(torch::kCPU, torch::kFloat32)
      .contiguous();
}

// The prompts left-padded into [rows, longest] ids on `device`, and which are real.
std::pair<torch::Tensor, torch::Tensor> left_padded(const std::vector<std::vector<int64_t>>& prompts,
                                                    const torch::Device& device) {
  int64_t longest = 0;
  for (const auto& prompt : prompts) longest = std::max(longest, static_cast<int64_t>(prompt.size()));
  const auto rows = static_cast<int64_t>(prompts.size());
  auto ids = torch::zeros({rows, longest}, torch::kInt64);
  auto real = torch::zeros({rows, longest}, torch::kBool);
  for (int64_t row = 0; row < rows; ++row) {
    const auto& prompt = prompts[static_cast<size_t>(row)];
    const auto length = static_cast<int64_t>(prompt.size());
    ids[row].narrow(0, longest - length, length).copy_(torch::tensor(prompt, torch::kInt64));
    real[row].narrow(0, longest - length, length).fill_(true);
  }
  return {ids.to(device), real.to(device)};
}

}  // namespace

at::Generator row_generator(uint64_t seed, int64_t row) {
  return at::detail::createCPUGenerator(splitmix64(splitmix64(seed) ^ static_cast<uint64_t>(row)));
}

int64_t sample_token(const torch::Tensor& logits, const SamplingOptions& options, at::Generator& generator) {
  if (options.temperature <= 0) return logits.argmax().item<int64_t>();
  const float minus_inf = -std::numeric_limits<float>::infinity();
  auto scaled = logits / options.temperature;
  if (options.top_k > 0 && options.top_k < scaled.size(0)) {
    const auto kth = std::get<0>(scaled.topk(options.top_k)).min();
    scaled = scaled.masked_fill(scaled < kth, minus_inf);
  }
  if (options.top_p < 1) {
    // Keeps the likeliest tokens until their mass reaches top_p: a token stays when the mass of
    // those likelier than it is below top_p (the likeliest always does).
    const auto [sorted, order] = scaled.sort(/*dim=*/0, /*descending=*/true);
    const auto probs = sorted.softmax(0);
    const auto dropped = order.masked_select((probs.cumsum(0) - probs) >= options.top_p);
    scaled = scaled.index_fill(0, dropped, minus_inf);
  }
  return torch::multinomial(scaled.softmax(0), 1, /*replacement=*/false, generator).item<int64_t>();
}

Rollouts sample_rollouts(model::CausalLM& model, const std::vector<std::vector<int64_t>>& prompts,
                         const SamplingOptions& options, const std::function<bool(bool)>& all_finished) {
  check_request(model, prompts, options);
  const auto start = std::chrono::steady_clock::now();
  EvalMode eval(model);
  const auto device = model.output_weight().device();
  const auto rows = static_cast<int64_t>(prompts.size());
  Rollouts out;
  out.completions.resize(prompts.size());
  out.stopped.assign(prompts.size(), false);
  std::vector<at::Generator> generators;
  for (int64_t row = 0; row < rows; ++row) generators.push_back(row_generator(options.seed, options.first_row + row));
  auto [ids, real] = left_padded(prompts, device);
  model::KvCache cache(model.config().num_layers, ids.size(1) + options.max_new_tokens);
  std::vector<int64_t> active(static_cast<size_t>(rows));  // the cache's rows, by prompt row
  for (int64_t row = 0; row < rows; ++row) active[static_cast<size_t>(row)] = row;
  bool idle = false;  // every local row done, forwards run for the other ranks only
  for (int64_t step = 0;; ++step) {
    const auto logits = last_logits(model, ids, real, cache);
    ++out.forwards;
    std::vector<int64_t> kept, next;  // the cache indices of unfinished rows, and their tokens
    for (size_t i = 0; !idle && i < active.size(); ++i) {
      const auto row = active[i];
      const auto row_logits = logits[static_cast<int64_t>(i)];
      if (options.on_logits) options.on_logits(row, step, row_logits);
      const auto token = sample_token(row_logits, options, generators[static_cast<size_t>(row)]);
      auto& completion = out.completions[static_cast<size_t>(row)];
      completion.push_back(token);
      ++out.generated_tokens;
      const bool stop =
          std::find(options.stop_ids.begin(), options.stop_ids.end(), token) != options.stop_ids.end();
      out.stopped[static_cast<size_t>(row)] = stop;
      if (stop || static_cast<int64_t>(completion.size()) == options.max_new_tokens) continue;
      kept.push_back(static_cast<int64_t>(i));
      next.push_back(token);
    }
    // Every rank has the same budget: at its end they all stop without asking.
    if (step + 1 == options.max_new_tokens) break;
    const bool local_done = kept.empty();
    if (all_finished ? all_finished(local_done) : local_done) break;
    if (local_done) {
      // The other ranks go on: one row of padding keeps this rank's forwards alongside theirs.
      if (!idle) cache.keep_rows(torch::zeros({1}, torch::kInt64));
      idle = true;
      ids = torch::zeros({1, 1}, ids.options());
      real = torch::zeros({1, 1}, real.options());
      continue;
    }
    if (kept.size() < active.size()) {
      cache.keep_rows(torch::tensor(kept, torch::kInt64));
      std::vector<int64_t> still;
      for (const auto i : kept) still.push_back(active[static_cast<size_t>(i)]);
      active = std::move(still);
    }
    ids = torch::tensor(next, torch::kInt64).view({-1, 1}).to(device);
    real = torch::ones({static_cast<int64_t>(next.size()), 1}, real.options());
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace xtrain::train
