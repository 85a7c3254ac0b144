#include "train/recipe_data.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include "data/dataset_loader.h"
#include "util/input_error.h"

namespace xtrain::train {

std::unique_ptr<data::SampleDataset> load_recipe_dataset(const std::string& key, const std::string& source,
                                                         const data::Tokenizer& tokenizer,
                                                         const config::Recipe& recipe, bool shuffle) {
  data::DatasetOptions options;
  options.seq_len = recipe.data.seq_len;
  options.seed = static_cast<uint64_t>(recipe.run.seed);
  options.shuffle = shuffle;
  options.chat_template = recipe.data.chat_template;
  options.workers = torch::get_num_threads();
  try {
    return data::load_dataset(source, tokenizer, options);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{} ({}): {}", key, source, e.what()));
  }
}

}  // namespace xtrain::train
