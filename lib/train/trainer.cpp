#include "train/trainer.h"

#include <cmath>

#include <fmt/format.h>
#include <torch/torch.h>

#include "ckpt/checkpoint.h"
#include "ckpt/hf_folder.h"
#include "train/evaluate.h"
#include "train/non_finite_guard.h"
#include "train/recipe_data.h"
#include "train/run_setup.h"
#include "train/training_run.h"
#include "device/device.h"
#include "util/input_error.h"
#include "util/process_memory.h"

namespace xtrain::train {

int train(const config::Recipe& recipe, const TrainOptions& options) {
  RunProgress progress;
  // A GPU's own memory beside the host's; on the CPU the host figure is the whole story.
  auto device_mib = [&] {
    if (!progress.device.is_cuda()) return 0.0;
    return static_cast<double>(util::peak_device_memory_bytes(progress.device)) / (1 << 20);
  };
  try {
    TrainingRun run(recipe, options, progress);
    return run.run();
  } catch (const c10::OutOfMemoryError& e) {
    out_of_memory(progress.step, e.what_without_backtrace(), util::peak_rss_mib(), device_mib(), recipe);
  } catch (const std::bad_alloc& e) {
    out_of_memory(progress.step, e.what(), util::peak_rss_mib(), device_mib(), recipe);
  } catch (const c10::Error& e) {
    if (!is_out_of_memory(e)) throw;
    out_of_memory(progress.step, e.what_without_backtrace(), util::peak_rss_mib(), device_mib(), recipe);
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
    const bool strict = recipe.checkpoint.resume.kind == config::ResumeKind::strict;
    auto choice = ckpt::CheckpointStore(recipe.run.dir, recipe.checkpoint.keep).newest_intact(strict);
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
