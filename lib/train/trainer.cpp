#include "train/trainer.h"

#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>
#include <torch/torch.h>

#include "ckpt/checkpoint.h"
#include "ckpt/hf_llama.h"
#include "config/option_registry.h"
#include "config/recipe_loader.h"
#include "data/text_source.h"
#include "data/token_dataset.h"
#include "data/tokenizer.h"
#include "memory/memory_policy.h"
#include "optim/adamw.h"
#include "optim/grad_clip.h"
#include "optim/lr_schedule.h"
#include "train/evaluate.h"
#include "train/metrics_log.h"
#include "train/model_factory.h"
#include "train/precision.h"
#include "train/stop_signal.h"
#include "train/training_loss.h"
#include "util/blas_probe.h"
#include "util/build_info.h"
#include "util/input_error.h"

namespace fs = std::filesystem;

namespace xtrain::train {

namespace {

using Clock = std::chrono::steady_clock;

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

// key names the recipe entry ("data.train") so that a data problem points at the recipe too.
data::TokenDataset load_dataset(const std::string& key, const std::string& source, const data::Tokenizer& tokenizer,
                                const config::Recipe& recipe, bool shuffle) {
  try {
    return data::TokenDataset(data::load_documents(source), tokenizer, recipe.data.seq_len,
                              static_cast<uint64_t>(recipe.run.seed), shuffle);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{} ({}): {}", key, source, e.what()));
  }
}

// A checkpoint can only continue a run of the same model.
void check_same_model(const config::Recipe& recipe, const ckpt::LoadedCheckpoint& checkpoint) {
  config::LoadOptions options;
  options.check_files = false;
  auto saved = config::load_recipe_text(checkpoint.recipe_yaml, checkpoint.dir + "/recipe.yaml", options);
  for (const auto& option : config::OptionRegistry::instance().options()) {
    if (option.path.rfind("model.", 0) != 0) continue;
    auto was = option.render(saved), now = option.render(recipe);
    if (was != now)
      throw InputError(fmt::format(
          "{}: this checkpoint was trained with {}={}, the recipe says {}; use the same model or "
          "set checkpoint.resume: never to start over",
          checkpoint.dir, option.path, was, now));
  }
}

std::optional<std::string> checkpoint_to_resume(const config::Recipe& recipe, const ckpt::CheckpointStore& store) {
  const auto& resume = recipe.checkpoint.resume;
  if (resume == "never") return std::nullopt;
  if (resume == "auto") return store.latest();
  return resume;
}

std::vector<optim::NamedParameter> named_parameters(model::LlamaForCausalLM& model) {
  std::vector<optim::NamedParameter> parameters;
  for (const auto& item : model->named_parameters())
    parameters.push_back({item.key(), item.value(), model::decays(item.key(), item.value())});
  return parameters;
}

memory::MemoryOptions memory_options(const config::Recipe& recipe) {
  const auto& m = recipe.memory;
  const bool long_sequences = recipe.data.seq_len > 2048;
  const std::string attention = m.attention == "auto" ? (long_sequences ? "blockwise" : "naive") : m.attention;
  return {m.recompute, m.recompute_ratio, m.offload_activations, attention, m.attention_block_size};
}

void apply_threads(const config::Recipe& recipe) {
  if (recipe.train.threads > 0) torch::set_num_threads(static_cast<int>(recipe.train.threads));
}

}  // namespace

int train(const config::Recipe& recipe, const TrainOptions& options) {
  apply_threads(recipe);
  util::warn_if_slow_blas();
  if (options.stop_at_step < 0 || options.stop_at_step > recipe.train.steps)
    throw InputError(fmt::format("--stop-at-step {} is outside 1..train.steps ({})", options.stop_at_step,
                                 recipe.train.steps));

  // Everything that can fail on bad input happens before the run folder is created.
  auto tokenizer = data::make_tokenizer(recipe.data.tokenizer);
  auto train_data = load_dataset("data.train", recipe.data.train, *tokenizer, recipe, recipe.data.shuffle);
  std::optional<data::TokenDataset> eval_data;
  if (!recipe.data.eval.empty()) eval_data.emplace(load_dataset("data.eval", recipe.data.eval, *tokenizer, recipe, false));
  auto model = build_model(recipe);
  auto offloader = memory::apply_memory_policy(model, memory_options(recipe));
  const int64_t loss_chunk = loss_chunk_tokens(recipe);
  optim::AdamW optimizer(named_parameters(model),
                         {recipe.optim.betas[0], recipe.optim.betas[1], recipe.optim.eps, recipe.optim.weight_decay});
  ckpt::CheckpointStore store(recipe.run.dir, recipe.checkpoint.keep);

  int64_t step = 0;
  int64_t samples_consumed = 0;
  if (auto resume_dir = checkpoint_to_resume(recipe, store)) {
    auto checkpoint = ckpt::load_checkpoint(*resume_dir);
    check_same_model(recipe, checkpoint);
    ckpt::load_model_tensors(model, checkpoint.model, *resume_dir + "/model.safetensors");
    optimizer.load_state(checkpoint.optimizer);
    try {
      step = checkpoint.trainer_state.at("step").get<int64_t>();
      samples_consumed = checkpoint.trainer_state.at("samples_consumed").get<int64_t>();
      at::Generator generator = at::detail::getDefaultCPUGenerator();  // a handle to the global one
      generator.set_state(from_hex(checkpoint.trainer_state.at("rng_cpu").get<std::string>()));
    } catch (const std::exception& e) {  // missing field, wrong type, corrupt RNG state
      throw InputError(fmt::format("{}/trainer_state.json: {}", *resume_dir, e.what()));
    }
    fmt::print("resumed from {} at step {}\n", *resume_dir, step);
  }

  fs::create_directories(recipe.run.dir);
  store.remove_stale_temp_folders();
  MetricsLog metrics(recipe.run.dir + "/metrics.jsonl", step);
  const std::string recipe_yaml = config::dump_recipe(recipe);
  install_stop_signal_handlers();

  const auto& t = recipe.train;
  const int64_t accumulation = recipe.accumulation_steps();
  const int64_t tokens_per_step = t.global_batch_size * recipe.data.seq_len;
  const int64_t last_step = options.stop_at_step > 0 ? options.stop_at_step : t.steps;
  const optim::LrSchedule schedule{recipe.optim.lr, recipe.optim.min_lr, recipe.optim.warmup_steps, t.steps,
                                   recipe.optim.schedule};
  std::vector<torch::Tensor> parameters = model->parameters();

  fmt::print("model: {} parameters ({} layers, hidden {}, heads {}/{} kv, vocab {})\n", model->num_parameters(),
             recipe.model.num_layers, recipe.model.hidden_size, recipe.model.num_heads, recipe.model.num_kv_heads,
             recipe.model.vocab_size);
  fmt::print("data: {} tokens, {} samples of {} tokens; unigram entropy {:.4f} nats/token\n",
             train_data.num_tokens(), train_data.num_samples(), recipe.data.seq_len, train_data.unigram_entropy());
  fmt::print("train: {} steps x {} sequences ({} micro batches of {}), {} tokens/step, dtype {}, {} threads\n",
             t.steps, t.global_batch_size, accumulation, t.micro_batch_size, tokens_per_step, t.dtype,
             torch::get_num_threads());

  auto save = [&](int64_t at_step) {
    ckpt::CheckpointContents contents;
    contents.model = ckpt::model_tensors(model);
    contents.model_config = ckpt::hf_config(model->config(), tokenizer->eos_id());
    contents.optimizer = optimizer.state();
    contents.trainer_state = {
        {"step", at_step},
        {"samples_consumed", samples_consumed},
        {"tokens_seen", samples_consumed * recipe.data.seq_len},
        {"rng_cpu", to_hex(at::detail::getDefaultCPUGenerator().get_state())},
        {"xtrain_version", XTRAIN_VERSION},
    };
    contents.recipe_yaml = recipe_yaml;
    fmt::print("checkpoint: {}\n", store.save(at_step, contents));
  };
  auto run_eval = [&](int64_t at_step) {
    if (!eval_data) return;
    auto result = evaluate(model, *eval_data, t.micro_batch_size, t.eval_batches, t.dtype, loss_chunk);
    fmt::print("eval step {}: loss {:.4f} | perplexity {:.3f} | {} tokens\n", at_step, result.loss,
               result.perplexity, result.tokens);
    nlohmann::ordered_json record = {{"step", at_step}, {"eval_loss", result.loss},
                                     {"eval_perplexity", result.perplexity}, {"eval_tokens", result.tokens}};
    metrics.write(record);
  };

  if (step >= last_step) {
    fmt::print("nothing to do: the checkpoint is at step {} and the run ends at step {}\n", step, last_step);
    return 0;
  }
  const int64_t first_step = step + 1;
  double interval_seconds = 0, session_seconds = 0;
  int64_t interval_steps = 0;
  model->train();
  while (step < last_step) {
    const auto started = Clock::now();
    ++step;
    const double lr = schedule.at(step);
    for (auto& p : parameters) p.mutable_grad() = torch::Tensor();
    double loss_value = 0;
    for (int64_t micro = 0; micro < accumulation; ++micro) {
      auto batch = train_data.batch(samples_consumed + micro * t.micro_batch_size, t.micro_batch_size);
      torch::Tensor loss;
      if (offloader) offloader->begin_forward();
      {
        AutocastScope autocast(t.dtype);
        loss = training_loss(model, batch, loss_chunk);
      }
      (loss / static_cast<double>(accumulation)).backward();
      loss_value += loss.item<double>() / static_cast<double>(accumulation);
    }
    samples_consumed += t.global_batch_size;
    if (!std::isfinite(loss_value))
      throw std::runtime_error(fmt::format("loss is {} at step {}; lower optim.lr or check the data", loss_value, step));
    const double grad_norm = optim::clip_grad_norm(parameters, recipe.optim.grad_clip);
    optimizer.step(lr);
    const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
    interval_seconds += seconds;
    session_seconds += seconds;
    ++interval_steps;

    nlohmann::ordered_json record = {{"step", step},
                                     {"loss", loss_value},
                                     {"lr", lr},
                                     {"grad_norm", grad_norm},
                                     {"tokens_per_s", tokens_per_step / seconds},
                                     {"step_s", seconds},
                                     {"tokens_seen", samples_consumed * recipe.data.seq_len},
                                     {"peak_rss_mib", peak_rss_mib()}};
    metrics.write(record);
    if (step % t.log_every == 0 || step == last_step || step == first_step) {
      const double mean_step = session_seconds / static_cast<double>(step - first_step + 1);
      fmt::print("step {:>{}}/{} | loss {:.4f} | lr {:.2e} | grad norm {:.3f} | {} tok/s | {:.0f} MiB | eta {}\n",
                 step, std::to_string(t.steps).size(), t.steps, loss_value, lr, grad_norm,
                 format_rate(tokens_per_step * interval_steps / interval_seconds), peak_rss_mib(),
                 format_duration(mean_step * static_cast<double>(last_step - step)));
      std::fflush(stdout);
      interval_seconds = 0;
      interval_steps = 0;
    }
    const bool stopping = stop_requested();
    if ((recipe.checkpoint.every > 0 && step % recipe.checkpoint.every == 0) || step == last_step || stopping) {
      save(step);
    }
    if (t.eval_every > 0 && step % t.eval_every == 0 && step != t.steps) run_eval(step);
    if (stopping) {
      fmt::print("stopped by signal {} after step {}; resume with the same command\n", stop_signal_number(), step);
      return 0;
    }
  }
  if (step == t.steps) run_eval(step);
  if (options.stop_at_step > 0 && step < t.steps)
    fmt::print("stopped at step {} of {} (--stop-at-step); run again to continue\n", step, t.steps);
  else
    fmt::print("done: {} steps\n", step);
  return 0;
}

int evaluate_checkpoint(const config::Recipe& recipe, const std::string& checkpoint_dir) {
  apply_threads(recipe);
  if (recipe.data.eval.empty())
    throw InputError("data.eval is empty: set it in the recipe or with --set data.eval=PATH");
  auto tokenizer = data::make_tokenizer(recipe.data.tokenizer);
  auto eval_data = load_dataset("data.eval", recipe.data.eval, *tokenizer, recipe, false);
  std::string dir = checkpoint_dir;
  if (dir.empty()) {
    auto latest = ckpt::CheckpointStore(recipe.run.dir, recipe.checkpoint.keep).latest();
    if (!latest)
      throw InputError(fmt::format("no checkpoint in {}/checkpoints: train first or pass --checkpoint DIR",
                                   recipe.run.dir));
    dir = *latest;
  }
  auto model = ckpt::load_hf_folder(dir);
  auto result = evaluate(model, eval_data, recipe.train.micro_batch_size, recipe.train.eval_batches, recipe.train.dtype);
  fmt::print("checkpoint: {}\neval loss {:.4f} | perplexity {:.3f} | {} tokens\n", dir, result.loss,
             result.perplexity, result.tokens);
  return 0;
}

}  // namespace xtrain::train
