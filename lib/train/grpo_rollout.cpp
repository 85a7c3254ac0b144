#include "train/grpo_rollout.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include <fmt/format.h>
#include <torch/torch.h>

#include "data/sample_dataset.h"
#include "model/layers/parameter_source.h"
#include "train/model_factory.h"
#include "train/precision.h"
#include "train/rollout_sampler.h"
#include "util/input_error.h"

namespace xtrain::train {

struct GrpoRollouts::Sampled {
  std::vector<int64_t> rows;  // global completion rows, this rank's, step slice after step slice
  std::vector<std::vector<int64_t>> prompts, completions;
  std::vector<bool> stopped;
  int64_t generated_tokens = 0;
  double seconds = 0;
};

namespace {

bool listed(const config::Recipe& recipe, const char* reward) {
  const auto& rewards = recipe.grpo.rewards;
  return std::find(rewards.begin(), rewards.end(), reward) != rewards.end();
}

RewardSettings reward_settings(const config::Recipe& recipe) {
  const auto& g = recipe.grpo;
  RewardSettings settings;
  for (size_t i = 0; i < g.rewards.size(); ++i)
    settings.terms.push_back({g.rewards[i], g.reward_weights.empty() ? 1.0 : g.reward_weights[i]});
  settings.format = g.reward.format;
  settings.max_completion_tokens = g.max_new_tokens;
  settings.overlong_cache = g.reward.overlong_cache;
  settings.command = {g.reward.command, g.reward.timeout_s};
  return settings;
}

std::unique_ptr<data::PromptDataset> read_prompt_dataset(const config::Recipe& recipe,
                                                         const text::Tokenizer& tokenizer) {
  data::PromptReadOptions options;
  options.seq_len = recipe.data.seq_len;
  options.max_new_tokens = recipe.grpo.max_new_tokens;
  options.chat_template = recipe.data.chat_template;
  if (listed(recipe, "number_match")) options.answer_needed_by = "grpo.rewards number_match";
  if (listed(recipe, "exact_match")) options.answer_needed_by = "grpo.rewards exact_match";
  try {
    return std::make_unique<data::PromptDataset>(data::read_prompts(recipe.data.train, tokenizer, options),
                                                 static_cast<uint64_t>(recipe.run.seed), recipe.data.shuffle);
  } catch (const InputError& e) {
    throw InputError(fmt::format("data.train ({}): {}", recipe.data.train, e.what()));
  }
}

// The seed of rollout r's generators: run.seed's, moved on by r (row_generator mixes it further).
uint64_t rollout_seed(int64_t run_seed, int64_t rollout) {
  return static_cast<uint64_t>(run_seed) * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(rollout) + 1;
}

// Rows prompt + completion of `local` (indices into the sampled rows), right-padded with `pad`;
// each position's target is the next token where that is a completion token.
data::MicroBatch completion_batch(const std::vector<std::vector<int64_t>>& prompts,
                                  const std::vector<std::vector<int64_t>>& completions,
                                  const std::vector<int64_t>& local, const std::vector<int64_t>& ids, int64_t pad) {
  int64_t width = 1;
  for (const auto i : local)
    width = std::max<int64_t>(width, static_cast<int64_t>(prompts[i].size() + completions[i].size()) - 1);
  const auto rows = static_cast<int64_t>(local.size());
  auto inputs = torch::full({rows, width}, pad, torch::kInt64);
  auto targets = torch::full({rows, width}, data::kIgnoreIndex, torch::kInt64);
  auto in = inputs.accessor<int64_t, 2>();
  auto out = targets.accessor<int64_t, 2>();
  for (int64_t r = 0; r < rows; ++r) {
    auto row = prompts[local[r]];
    const auto prompt_length = static_cast<int64_t>(row.size());
    row.insert(row.end(), completions[local[r]].begin(), completions[local[r]].end());
    for (int64_t t = 0; t + 1 < static_cast<int64_t>(row.size()); ++t) {
      in[r][t] = row[t];
      if (t + 1 >= prompt_length) out[r][t] = row[t + 1];
    }
  }
  data::MicroBatch batch;
  batch.inputs = inputs;
  batch.targets = targets;
  batch.target_count = 1;  // every micro batch weighs alike (train/grpo_objective.h)
  batch.sample_ids = torch::tensor(ids, torch::kInt64);
  return batch;
}

}  // namespace

GrpoRollouts::GrpoRollouts(const config::Recipe& recipe, const text::Tokenizer& tokenizer, const torch::Device& device)
    : recipe_(recipe), tokenizer_(tokenizer), device_(device), prompts_(read_prompt_dataset(recipe, tokenizer)),
      rewards_(reward_settings(recipe)) {
  if (recipe.grpo.beta <= 0) return;
  reference_ = build_model(recipe);
  model::place_unmaterialized(*reference_, device);
  model::materialize(*reference_, initial_weights(recipe, *reference_, /*fresh=*/true).source);
  reference_->eval();
  for (auto& parameter : reference_->parameters()) parameter.set_requires_grad(false);
}

GrpoRollouts::~GrpoRollouts() = default;

const GrpoStepBatch& GrpoRollouts::step_batch(int64_t step, parallel::ParallelModel& policy, RankSums& sums,
                                              const GrpoLayout& layout, std::map<std::string, double>& metrics) {
  const int64_t per_rollout = recipe_.grpo.steps_per_rollout;
  const int64_t cycle = per_rollout * recipe_.grpo.iterations;
  const int64_t rollout = (step - 1) / cycle;
  if (rollout != rollout_) {
    if ((step - 1) % cycle != 0 && !(kept_ && kept_->rollout == rollout) && layout.data_rank == 0)
      fmt::print("notice: step {} is inside rollout {}'s {} steps and the checkpoint kept no rollout: its completions "
                 "are sampled again from the checkpoint's weights, not from the weights at step {}\n",
                 step, rollout, cycle, rollout * cycle + 1);
    sample(rollout, policy, sums, layout);
  }
  metrics = metrics_;
  return steps_[static_cast<size_t>(((step - 1) % cycle) % per_rollout)];
}

// The policy without gradients and in eval mode, its head gathered throughout (FSDP). A rollout
// the resumed checkpoint kept is built from its rows instead.
void GrpoRollouts::sample(int64_t rollout, parallel::ParallelModel& policy, RankSums& sums, const GrpoLayout& layout) {
  torch::NoGradGuard no_grad;
  auto& model = policy.model();
  const bool was_training = model.is_training();
  policy.begin_inference();
  model.eval();
  const bool kept = kept_ && kept_->rollout == rollout;
  if (!kept) kept_.reset();  // build_steps reads the log-probabilities of a kept rollout
  sampled_ = std::make_unique<Sampled>(kept ? kept_rows(*kept_, layout) : sample_rows(rollout, model, sums, layout));
  totals_ = kept ? kept_->totals : score(rollout, *sampled_, sums);
  build_steps(rollout, *sampled_, totals_, advantages(totals_), model, layout);
  kept_.reset();
  model.train(was_training);
  policy.end_inference();
  rollout_ = rollout;
  layout_ = layout;
}

std::optional<KeptRollout> GrpoRollouts::rollout_to_keep(int64_t step, RankSums& sums) const {
  const int64_t cycle = recipe_.grpo.steps_per_rollout * recipe_.grpo.iterations;
  if (step % cycle == 0 || rollout_ != (step - 1) / cycle) return std::nullopt;
  // This rank's rows lie in build_steps' micro batches, in order: slice, then micro batch, then row.
  const int64_t share = recipe_.train.global_batch_size / layout_.data_ranks, micro = layout_.micro_batch_size;
  std::vector<std::vector<float>> logps;
  for (size_t i = 0; i < sampled_->rows.size(); ++i) {
    const auto local = static_cast<int64_t>(i);
    const auto& item = steps_[static_cast<size_t>(local / share)].micro[static_cast<size_t>(local % share / micro)];
    const auto from = static_cast<int64_t>(sampled_->prompts[i].size()) - 1;
    const auto n = static_cast<int64_t>(sampled_->completions[i].size());
    const auto values = item.old_logps[local % micro].slice(0, from, from + n).to(torch::kCPU).contiguous();
    logps.emplace_back(values.data_ptr<float>(), values.data_ptr<float>() + n);
  }
  return gather_kept_rollout(rollout_, recipe_.train.global_batch_size * recipe_.grpo.steps_per_rollout, totals_,
                             sampled_->rows, sampled_->completions, logps, sums);
}

void GrpoRollouts::restore_rollout(const std::string& dir) {
  const auto path = dir + "/" + kKeptRolloutFile;
  if (!std::filesystem::exists(path)) return;
  const int64_t rows = recipe_.train.global_batch_size * recipe_.grpo.steps_per_rollout;
  kept_ = std::make_unique<KeptRollout>(
      read_kept_rollout(path, rows, rows * (3 + static_cast<int64_t>(recipe_.grpo.rewards.size())) + 2));
}

// This rank's rows of a kept rollout, as sample_rows gives them.
GrpoRollouts::Sampled GrpoRollouts::kept_rows(const KeptRollout& kept, const GrpoLayout& layout) const {
  const auto& g = recipe_.grpo;
  const int64_t batch = recipe_.train.global_batch_size, share = batch / layout.data_ranks;
  const int64_t rows = batch * g.steps_per_rollout, prompts_per_rollout = rows / g.num_generations;
  Sampled sampled;
  for (int64_t slice = 0; slice < g.steps_per_rollout; ++slice)
    for (int64_t c = slice * batch + layout.data_rank * share; c < slice * batch + (layout.data_rank + 1) * share; ++c) {
      sampled.rows.push_back(c);
      sampled.prompts.push_back(prompts_->at(kept.rollout * prompts_per_rollout + c / g.num_generations).prompt);
      sampled.completions.push_back(kept.completions[static_cast<size_t>(c)]);
      sampled.stopped.push_back(kept.totals[static_cast<size_t>(2 * rows + c)] == 0.0);
    }
  return sampled;
}

GrpoRollouts::Sampled GrpoRollouts::sample_rows(int64_t rollout, model::CausalLM& policy, RankSums& sums,
                                                const GrpoLayout& layout) {
  const auto& g = recipe_.grpo;
  const int64_t batch = recipe_.train.global_batch_size, share = batch / layout.data_ranks;
  const int64_t prompts_per_rollout = batch * g.steps_per_rollout / g.num_generations;
  SamplingOptions options;
  options.max_new_tokens = g.max_new_tokens;
  options.temperature = g.temperature;
  options.top_p = g.top_p;
  options.top_k = g.top_k;
  options.stop_ids = {tokenizer_.eos_id()};
  options.seed = rollout_seed(recipe_.run.seed, rollout);
  auto all_finished = [&sums](bool mine) { return sums.sum(mine ? 0.0 : 1.0) == 0.0; };
  Sampled sampled;
  for (int64_t slice = 0; slice < g.steps_per_rollout; ++slice) {
    options.first_row = slice * batch + layout.data_rank * share;
    std::vector<std::vector<int64_t>> prompts;
    for (int64_t c = options.first_row; c < options.first_row + share; ++c) {
      sampled.rows.push_back(c);
      prompts.push_back(prompts_->at(rollout * prompts_per_rollout + c / g.num_generations).prompt);
    }
    auto out = sample_rollouts(policy, prompts, options, all_finished);
    sampled.prompts.insert(sampled.prompts.end(), prompts.begin(), prompts.end());
    sampled.completions.insert(sampled.completions.end(), out.completions.begin(), out.completions.end());
    sampled.stopped.insert(sampled.stopped.end(), out.stopped.begin(), out.stopped.end());
    sampled.generated_tokens += out.generated_tokens;
    sampled.seconds += out.seconds;
  }
  return sampled;
}

// Every rank's rewards, lengths and truncations by global row, then each reward's values, then the
// tokens generated and the seconds taken, summed over the ranks in one all-reduce.
std::vector<double> GrpoRollouts::score(int64_t rollout, const Sampled& sampled, RankSums& sums) {
  const auto& g = recipe_.grpo;
  const int64_t rows = recipe_.train.global_batch_size * g.steps_per_rollout;
  const int64_t prompts_per_rollout = rows / g.num_generations;
  const auto terms = static_cast<int64_t>(g.rewards.size());
  std::vector<RewardInput> inputs;
  for (size_t i = 0; i < sampled.rows.size(); ++i) {
    const auto& record = prompts_->at(rollout * prompts_per_rollout + sampled.rows[i] / g.num_generations);
    auto completion = sampled.completions[i];
    if (sampled.stopped[i]) completion.pop_back();  // TRL decodes without the special tokens
    inputs.push_back({record.prompt_json, tokenizer_.decode(completion), record.answer, record.has_answer,
                      static_cast<int64_t>(sampled.completions[i].size()),
                      fmt::format("{}:{}", recipe_.data.train, record.line)});
  }
  const auto rewards = rewards_.score(inputs);
  std::vector<double> totals(static_cast<size_t>(rows * (3 + terms) + 2), 0.0);
  for (size_t i = 0; i < sampled.rows.size(); ++i) {
    const auto c = static_cast<size_t>(sampled.rows[i]);
    totals[c] = rewards.total[i];
    totals[rows + c] = static_cast<double>(sampled.completions[i].size());
    totals[2 * rows + c] = sampled.stopped[i] ? 0.0 : 1.0;
    for (int64_t k = 0; k < terms; ++k) totals[(3 + k) * rows + c] = rewards.terms[k][i];
  }
  totals[totals.size() - 2] = static_cast<double>(sampled.generated_tokens);
  totals[totals.size() - 1] = sampled.seconds;
  totals = sums.sum(std::move(totals));
  totals.back() /= static_cast<double>(sums.ranks());  // the ranks' mean seconds
  return totals;
}

// The advantages of every row (grpo_advantages over the whole rollout, as TRL's over all
// processes), and the rollout's metrics.
torch::Tensor GrpoRollouts::advantages(const std::vector<double>& totals) {
  const auto& g = recipe_.grpo;
  const int64_t rows = recipe_.train.global_batch_size * g.steps_per_rollout;
  auto block = [&](int64_t k) {
    return torch::tensor(std::vector<double>(totals.begin() + k * rows, totals.begin() + (k + 1) * rows),
                         torch::kFloat64);
  };
  const auto scale = g.scale_rewards == config::GrpoRewardScaling::group   ? GrpoRewardScale::group
                     : g.scale_rewards == config::GrpoRewardScaling::batch ? GrpoRewardScale::batch
                                                                           : GrpoRewardScale::none;
  auto result = grpo_advantages(block(0).to(torch::kFloat32), g.num_generations, scale);
  metrics_.clear();
  for (const auto& [name, value] : result.metrics) metrics_[name] = value.item<double>();
  for (size_t k = 0; k < g.rewards.size(); ++k)
    metrics_["rewards/" + g.rewards[k] + "/mean"] = block(3 + static_cast<int64_t>(k)).mean().item<double>();
  metrics_["completions/mean_length"] = block(1).mean().item<double>();
  metrics_["completions/clipped_ratio"] = block(2).mean().item<double>();
  const double tokens = totals[totals.size() - 2];
  const double seconds = totals[totals.size() - 1];
  metrics_["rollout/tokens"] = tokens;
  metrics_["rollout/seconds"] = seconds;
  metrics_["rollout/tokens_per_s"] = seconds > 0 ? tokens / seconds : 0.0;
  return result.advantages.to(torch::kFloat32);
}

// Each step slice's micro batches of this rank, with their advantages and, where the loss needs
// them, the rollout policy's and the reference's log-probabilities.
void GrpoRollouts::build_steps(int64_t rollout, const Sampled& sampled, const std::vector<double>& totals,
                               const torch::Tensor& advantages, model::CausalLM& policy, const GrpoLayout& layout) {
  const auto& g = recipe_.grpo;
  const int64_t batch = recipe_.train.global_batch_size, share = batch / layout.data_ranks;
  const int64_t rows = batch * g.steps_per_rollout, micro = layout.micro_batch_size;
  const bool old_needed = g.steps_per_rollout * g.iterations > 1;
  steps_.assign(static_cast<size_t>(g.steps_per_rollout), {});
  for (int64_t slice = 0; slice < g.steps_per_rollout; ++slice) {
    auto& step = steps_[static_cast<size_t>(slice)];
    step.share.micro_batches = batch / micro;
    for (int64_t c = slice * batch; c < (slice + 1) * batch; ++c) step.share.step_tokens += totals[rows + c];
    for (int64_t first = 0; first < share; first += micro) {
      std::vector<int64_t> local, ids, global;
      for (int64_t i = slice * share + first; i < slice * share + first + micro; ++i) {
        local.push_back(i);
        global.push_back(sampled.rows[i]);
        ids.push_back(rollout * rows + sampled.rows[i]);
      }
      GrpoMicroBatch item;
      item.batch = completion_batch(sampled.prompts, sampled.completions, local, ids, tokenizer_.eos_id());
      item.advantages = advantages.index_select(0, torch::tensor(global, torch::kInt64));
      if (old_needed) item.old_logps = kept_ ? kept_logps(item.batch, global) : logps_of(policy, item.batch);
      if (reference_) item.ref_logps = logps_of(*reference_, item.batch);
      step.micro.push_back(std::move(item));
    }
  }
}

// As the training step's forward computes them (its precision), without gradient.
torch::Tensor GrpoRollouts::logps_of(model::CausalLM& model, const data::MicroBatch& batch) {
  torch::NoGradGuard no_grad;
  PrecisionScope precision(recipe_.train.dtype, device_.type());
  const auto input = model_batch(batch, device_);
  const auto hidden = model.forward(input).hidden;
  return target_token_log_probs(model, hidden, input.labels, recipe_.grpo.temperature);
}

// A kept rollout's log-probabilities where logps_of would put them (0 where nothing is scored).
torch::Tensor GrpoRollouts::kept_logps(const data::MicroBatch& batch, const std::vector<int64_t>& rows) const {
  auto logps = torch::zeros(batch.targets.sizes(), torch::kFloat32);
  const auto targets = batch.targets.accessor<int64_t, 2>();
  for (size_t r = 0; r < rows.size(); ++r) {
    const auto& values = kept_->old_logps[static_cast<size_t>(rows[r])];
    if (values.empty()) continue;
    int64_t t = 0;
    while (targets[static_cast<int64_t>(r)][t] == data::kIgnoreIndex) ++t;  // the prompt
    logps[static_cast<int64_t>(r)].slice(0, t, t + static_cast<int64_t>(values.size()))
        .copy_(torch::tensor(values, torch::kFloat32));
  }
  return logps.to(device_);
}

}  // namespace xtrain::train
