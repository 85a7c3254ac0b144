#include "train/batch_dump.h"

#include <numeric>
#include <vector>

#include <fmt/format.h>
#include <torch/torch.h>

#include "ckpt/safetensors.h"
#include "data/micro_batch.h"
#include "train/recipe_data.h"
#include "util/input_error.h"

namespace xtrain::train {

int dump_batch(const config::Recipe& recipe, const BatchDumpOptions& options) {
  const bool eval = options.split == "eval";
  const std::string key = eval ? "data.eval" : "data.train";
  const std::string& source = eval ? recipe.data.eval : recipe.data.train;
  if (source.empty()) throw InputError(fmt::format("{} is empty: there are no samples to write", key));
  const auto tokenizer = text::make_tokenizer(recipe.data.tokenizer);
  const auto dataset = load_recipe_dataset(key, source, *tokenizer, recipe, /*shuffle=*/false);
  if (options.first + options.count > dataset->num_samples())
    throw InputError(fmt::format("{} has {} samples of {} tokens: samples {}..{} do not exist", key,
                                 dataset->num_samples(), dataset->seq_len(), options.first,
                                 options.first + options.count - 1));
  std::vector<int64_t> samples(static_cast<size_t>(options.count));
  std::iota(samples.begin(), samples.end(), options.first);
  const auto batch = data::make_micro_batch(*dataset, samples, /*pack=*/false);
  ckpt::TensorMap tensors{
      {"input_ids", batch.inputs}, {"labels", batch.targets}, {"attention_mask", torch::ones_like(batch.inputs)}};
  // An image classifier's pixels, and the crops and flips its training images took.
  if (dataset->pixel_values(options.first).defined() && !dataset->preference_pairs()) {
    std::vector<torch::Tensor> pixels, augmentations;
    for (int64_t g : samples) {
      pixels.push_back(dataset->pixel_values(g));
      if (auto drawn = dataset->augmentation(g); drawn.defined()) augmentations.push_back(drawn);
    }
    if (pixels.front().size(0) == 1) tensors["pixel_values"] = torch::cat(pixels);
    if (!augmentations.empty()) tensors["augmentation"] = torch::stack(augmentations);
  }
  ckpt::save_safetensors(options.out, tensors);
  fmt::print("wrote {} samples of {} tokens ({} targets) from {} to {}\n", options.count, dataset->seq_len(),
             batch.target_count, key, options.out);
  return 0;
}

}  // namespace xtrain::train
