#include "train/recipe_data.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include "data/dataset_loader.h"
#include "data/masked_lm_dataset.h"
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
  std::unique_ptr<data::SampleDataset> dataset;
  try {
    dataset = data::load_dataset(source, tokenizer, options);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{} ({}): {}", key, source, e.what()));
  }
  if (recipe.data.objective != "mlm") return dataset;
  return std::make_unique<data::MaskedLmDataset>(std::move(dataset), masked_lm_options(tokenizer, recipe));
}

data::MaskedLmOptions masked_lm_options(const data::Tokenizer& tokenizer, const config::Recipe& recipe) {
  auto required = [&](const char* token) {
    const auto id = tokenizer.token_id(token);
    if (!id)
      throw InputError(fmt::format("data.objective mlm: tokenizer '{}' has no {} token; masked-LM training needs "
                                   "[CLS] and [MASK], as a WordPiece tokenizer.json (BERT's) has",
                                   recipe.data.tokenizer, token));
    return *id;
  };
  data::MaskedLmOptions options;
  options.probability = recipe.data.mlm_probability;
  options.cls_id = required("[CLS]");
  options.mask_id = required("[MASK]");
  options.special_ids = {options.cls_id, options.mask_id, tokenizer.eos_id()};
  for (const char* token : {"[SEP]", "[PAD]", "[UNK]"})
    if (const auto id = tokenizer.token_id(token)) options.special_ids.push_back(*id);
  const auto pad = tokenizer.token_id("[PAD]");
  if (pad && *pad != recipe.model.pad_token_id)
    throw InputError(fmt::format("model.pad_token_id {} is not the id of tokenizer '{}''s [PAD], {}: set it to {}",
                                 recipe.model.pad_token_id, recipe.data.tokenizer, *pad, *pad));
  options.vocab_size = tokenizer.vocab_size();
  options.seed = static_cast<uint64_t>(recipe.run.seed);
  return options;
}

}  // namespace xtrain::train
