#include "train/resume_changes.h"

#include <algorithm>

#include <fmt/format.h>

#include "config/option_registry.h"
#include "config/recipe_loader.h"
#include "util/input_error.h"

namespace xtrain::train {
namespace {

bool starts_with(const std::string& text, const char* prefix) { return text.rfind(prefix, 0) == 0; }

// Keys whose change makes the next steps read other samples, or other tokens (the data source,
// its tokenizer and template), or in another order (run.seed draws the shuffle).
bool data_order(const std::string& path) {
  static const char* const kKeys[] = {"run.seed",         "data.train",   "data.tokenizer",      "data.chat_template",
                                      "data.seq_len",     "data.pack",    "data.shuffle",        "data.balance_window",
                                      "train.global_batch_size"};
  return std::any_of(std::begin(kKeys), std::end(kKeys), [&](const char* key) { return path == key; });
}

// Options that change how a run is carried out, not what it computes.
bool free_to_change(const std::string& path) {
  static const char* const kPrefixes[] = {"parallel.", "memory.", "checkpoint.", "dist."};
  static const char* const kKeys[] = {"name",           "run.dir",        "train.log_every",      "train.eval_every",
                                      "train.eval_batches", "train.threads", "train.omp_wait_policy", "train.device",
                                      "train.stop_signals", "data.prefetch", "data.eval", "data.cache_dir"};
  return std::any_of(std::begin(kPrefixes), std::end(kPrefixes), [&](const char* p) { return starts_with(path, p); }) ||
         std::any_of(std::begin(kKeys), std::end(kKeys), [&](const char* key) { return path == key; });
}

}  // namespace

void check_model_unchanged(const config::Recipe& recipe, const std::string& saved_recipe_yaml,
                           const std::string& checkpoint_dir) {
  check_resume_changes(recipe, saved_recipe_yaml, checkpoint_dir, {}, /*model_only=*/true);
}

std::vector<std::string> check_resume_changes(const config::Recipe& recipe, const std::string& saved_recipe_yaml,
                                              const std::string& checkpoint_dir, const ResumeAllowance& allowed,
                                              bool model_only) {
  config::LoadOptions options;
  options.check_files = false;
  const auto saved = config::load_recipe_text(saved_recipe_yaml, checkpoint_dir + "/recipe.yaml", options);
  std::vector<std::string> notices, refused;
  for (const auto& option : config::OptionRegistry::instance().options()) {
    const auto was = option.render(saved), now = option.render(recipe);
    if (was == now || free_to_change(option.path) || (model_only && !starts_with(option.path, "model."))) continue;
    if (starts_with(option.path, "model."))
      throw InputError(fmt::format(
          "{}: this checkpoint was trained with {}={}, the recipe says {}; use the same model or "
          "set checkpoint.resume: never to start over",
          checkpoint_dir, option.path, was, now));
    const bool named = std::find(allowed.keys.begin(), allowed.keys.end(), option.path) != allowed.keys.end();
    // Each optimizer would read the saved moments as its own state (Muon's momentum is AdamW's
    // first moment, and its second moment is zeros, which AdamW would divide by): only with the
    // opt-in, whose caller then starts the optimizer's state afresh.
    if (option.path == "optim.name" && !named)
      throw InputError(fmt::format(
          "{}: this checkpoint was trained with optim.name={}, the recipe says {}; its optimizer state is {}'s. Use "
          "optim.name {} to resume, or pass --allow-changed optim.name to continue from its weights, data position "
          "and schedule with the {} state started afresh",
          checkpoint_dir, was, now, was, was, now));
    const std::string change = fmt::format("{}: {} -> {}{}", option.path, was, now,
                                           option.path == "optim.name" ? " (its state started afresh)" : "");
    const bool allow = allowed.data_change || named;
    if (data_order(option.path) && !allow) refused.push_back(change);
    notices.push_back(change);
  }
  // Every refused change at once, so that one rerun can fix them all.
  if (!refused.empty())
    throw InputError(fmt::format(
        "{}: the recipe changes which samples the next steps read since this checkpoint ({}), so the run would "
        "not continue as it would have. Use the checkpoint's value{}, or pass --allow-data-change (or "
        "--allow-changed KEY for one key) to continue anyway",
        checkpoint_dir, fmt::join(refused, "; "), refused.size() > 1 ? "s" : ""));
  return notices;
}

}  // namespace xtrain::train
