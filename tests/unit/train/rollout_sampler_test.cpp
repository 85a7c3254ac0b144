// The rollout sampler (train/rollout_sampler.h) against transformers' generate(): greedy
// completions of a left-padded batch of prompts of different lengths equal transformers' own
// (tools/reference/rollout_hf.py) for llama, qwen2, qwen3 and qwen3_moe folders that
// save_pretrained wrote; each cached decoding step's logits equal a full forward's over the
// row's unpadded tokens so far; stop ids end a row after the id; sampling is reproducible from
// the seed and a row's draws do not depend on the other rows; ranks that finish early keep
// running forwards until every rank is done.
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <torch/torch.h>

#include <catch2/catch.hpp>

#include "ckpt/hf_folder.h"
#include "ckpt/safetensors.h"
#include "scratch_dir.h"
#include "tensor_compare.h"
#include "train/rollout_sampler.h"

using namespace xtrain;

// Named, not anonymous: the unit tests build as unity files.
namespace rollout_sampler_test {

struct Golden {
  std::shared_ptr<model::CausalLM> model;
  std::vector<std::vector<int64_t>> prompts, completions;
  double margin = 0;
};

std::vector<int64_t> ids_of(const torch::Tensor& t) {
  const auto c = t.to(torch::kInt64).contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

// One folder and golden file per family for the whole run: transformers takes seconds to start.
Golden& make_golden(const std::string& family) {
  static testing::ScratchDir scratch;
  static std::map<std::string, Golden> made;
  if (const auto it = made.find(family); it != made.end()) return it->second;
  const auto dir = (scratch.path() / family).string(), out = (scratch.path() / (family + ".safetensors")).string();
  const auto command = fmt::format("{} {}/tools/reference/rollout_hf.py golden --family {} --out {} --golden {} "
                                   "> /dev/null 2>&1",
                                   XTRAIN_PYTHON, XTRAIN_SOURCE_DIR, family, dir, out);
  REQUIRE(std::system(command.c_str()) == 0);
  auto tensors = ckpt::load_safetensors(out).tensors;
  Golden golden;
  golden.model = ckpt::load_hf_folder(dir);
  const auto& prompts = tensors.at("prompts");
  const auto lengths = ids_of(tensors.at("lengths"));
  for (int64_t row = 0; row < prompts.size(0); ++row) {
    const auto length = lengths[static_cast<size_t>(row)];
    golden.prompts.push_back(ids_of(prompts[row].narrow(0, prompts.size(1) - length, length)));
    golden.completions.push_back(ids_of(tensors.at("completions")[row]));
  }
  golden.margin = tensors.at("margin").item<double>();
  return made[family] = std::move(golden);
}

// The logits of the last token of `ids`, one row alone, no cache.
torch::Tensor full_forward_logits(model::CausalLM& model, const std::vector<int64_t>& ids) {
  torch::NoGradGuard no_grad;
  model::Batch batch;
  batch.input_ids = torch::tensor(ids, torch::kInt64).unsqueeze(0);
  return model.logits(batch)[0][-1].to(torch::kFloat32);
}

}  // namespace rollout_sampler_test

using namespace rollout_sampler_test;

TEST_CASE("greedy rollouts equal transformers' generate, and cached logits a full forward's", "[train][rollout]") {
  const std::string family = GENERATE("llama", "qwen2", "qwen3", "qwen3_moe");
  INFO(family);
  auto& golden = make_golden(family);
  auto& model = *golden.model;
  train::SamplingOptions options;
  options.temperature = 0;
  options.max_new_tokens = 32;
  model.train();  // the sampler runs in eval mode and puts the model back
  std::map<std::pair<int64_t, int64_t>, torch::Tensor> seen;
  options.on_logits = [&](int64_t row, int64_t step, const torch::Tensor& logits) { seen[{row, step}] = logits.clone(); };
  const auto rollouts = train::sample_rollouts(model, golden.prompts, options);
  REQUIRE(rollouts.completions.size() == golden.prompts.size());
  for (size_t row = 0; row < golden.prompts.size(); ++row) {
    INFO("row " << row << " of a prompt of " << golden.prompts[row].size() << " tokens");
    CHECK(rollouts.completions[row] == golden.completions[row]);
    CHECK_FALSE(rollouts.stopped[row]);
  }
  CHECK(rollouts.generated_tokens == 32 * static_cast<int64_t>(golden.prompts.size()));
  CHECK(rollouts.forwards == 32);
  CHECK(model.is_training());
  // Every step of rows 1 (the longest prompt) and 2 (one token): the cache's logits against one
  // row's forward over its prompt and completion so far.
  double worst = 0;
  for (const int64_t row : {1, 2})
    for (int64_t step = 0; step < 32; step += 1) {
      auto ids = golden.prompts[static_cast<size_t>(row)];
      const auto& completion = rollouts.completions[static_cast<size_t>(row)];
      ids.insert(ids.end(), completion.begin(), completion.begin() + step);
      worst = std::max(worst, testing::max_relative_error(seen.at({row, step}), full_forward_logits(model, ids)));
    }
  CHECK(worst < 1e-5);
  fmt::print("rollouts ({}): 5 rows x 32 greedy tokens equal transformers'; smallest greedy margin {:.1e}; cached "
             "logits against a full forward: worst relative error {:.1e}\n",
             family, golden.margin, worst);
}

TEST_CASE("rollouts end after a stop id, and sampling depends on the seed and the row only", "[train][rollout]") {
  auto& golden = make_golden("qwen3");
  auto& model = *golden.model;
  train::SamplingOptions greedy;
  greedy.temperature = 0;
  greedy.max_new_tokens = 32;
  // Row 0's sixth greedy token as the stop id: every row is its greedy completion up to and
  // including the id's first appearance.
  const auto stop = golden.completions[0][5];
  greedy.stop_ids = {stop};
  const auto stopped = train::sample_rollouts(model, golden.prompts, greedy);
  for (size_t row = 0; row < golden.prompts.size(); ++row) {
    const auto& full = golden.completions[row];
    const auto at = std::find(full.begin(), full.end(), stop);
    const bool hit = at != full.end();
    CHECK(stopped.stopped[row] == hit);
    CHECK(stopped.completions[row] == std::vector<int64_t>(full.begin(), hit ? at + 1 : full.end()));
  }
  CHECK(stopped.completions[0].size() <= 6);

  train::SamplingOptions options;
  options.temperature = 0.9;
  options.top_k = 40;
  options.top_p = 0.95;
  options.seed = 17;
  options.max_new_tokens = 16;
  const auto first = train::sample_rollouts(model, golden.prompts, options);
  const auto again = train::sample_rollouts(model, golden.prompts, options);
  CHECK(first.completions == again.completions);
  CHECK(first.completions != golden.completions);  // it samples
  // Other prompts in rows 1.. leave row 0's draws alone.
  auto others = golden.prompts;
  for (size_t row = 1; row < others.size(); ++row) others[row] = std::vector<int64_t>(row * 3, 7);
  CHECK(train::sample_rollouts(model, others, options).completions[0] == first.completions[0]);
  options.seed = 18;
  CHECK(train::sample_rollouts(model, golden.prompts, options).completions != first.completions);
  // top_k 1, and a nucleus smaller than the likeliest token, are greedy.
  options.top_k = 1;
  options.top_p = 1;
  greedy.stop_ids.clear();
  greedy.max_new_tokens = options.max_new_tokens;
  const auto reference = train::sample_rollouts(model, golden.prompts, greedy).completions;
  CHECK(train::sample_rollouts(model, golden.prompts, options).completions == reference);
  options.top_k = 0;
  options.top_p = 1e-6;
  CHECK(train::sample_rollouts(model, golden.prompts, options).completions == reference);
}

TEST_CASE("a rank whose rows finish early runs forwards until every rank is done", "[train][rollout]") {
  auto& golden = make_golden("llama");
  train::SamplingOptions options;
  options.temperature = 0;
  options.max_new_tokens = 12;
  options.stop_ids = {golden.completions[0][1], golden.completions[1][1], golden.completions[2][1],
                      golden.completions[3][1], golden.completions[4][1]};
  // Alone, the rows end at their second token at the latest: 2 forwards.
  const auto alone = train::sample_rollouts(*golden.model, golden.prompts, options);
  CHECK(alone.forwards <= 2);
  // Another rank goes on until its 7th step: this one runs 7 forwards, its completions unchanged.
  std::vector<bool> asked;
  const auto together = train::sample_rollouts(*golden.model, golden.prompts, options, [&](bool local_done) {
    asked.push_back(local_done);
    return asked.size() >= 7;
  });
  CHECK(together.forwards == 7);
  CHECK(asked.size() == 7);
  CHECK(asked.back());
  CHECK(together.completions == alone.completions);
  CHECK(together.generated_tokens == alone.generated_tokens);
}

TEST_CASE("rollouts refuse empty prompts, ids outside the vocabulary and rows past max_seq_len", "[train][rollout]") {
  auto& golden = make_golden("qwen2");
  train::SamplingOptions options;
  options.max_new_tokens = 60;
  CHECK_THROWS_WITH(train::sample_rollouts(*golden.model, golden.prompts, options),
                    "sample_rollouts: prompt row 1 of 11 tokens plus 60 new ones exceeds model.max_seq_len 64");
  options.max_new_tokens = 4;
  CHECK_THROWS_WITH(train::sample_rollouts(*golden.model, {{1, 2}, {}}, options), "sample_rollouts: prompt row 1 is empty");
  CHECK_THROWS_WITH(train::sample_rollouts(*golden.model, {{1, 97}}, options),
                    "sample_rollouts: prompt row 0 holds token id 97, outside the vocabulary of 97");
  CHECK_THROWS_WITH(train::sample_rollouts(*golden.model, {}, options), "sample_rollouts: no prompts");
}
