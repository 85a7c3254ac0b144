#include "train/recipe_data.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <filesystem>

#include "data/dataset_loader.h"
#include "data/image_chat_dataset.h"
#include "data/image_class_dataset.h"
#include "data/image_text_dataset.h"
#include "data/masked_lm_dataset.h"
#include "data/preference_dataset.h"
#include "data/span_corruption.h"
#include "data/sources/source_list.h"
#include "model/spec/model_spec.h"
#include "util/input_error.h"

namespace xtrain::train {

namespace {

// The image processor of model.init_from's folder (preprocessor_config.json), or CLIP's with the
// vision tower's image size; its crop must be the size the tower takes.
image::ClipImageProcessorConfig image_processor(const config::Recipe& recipe) {
  const auto& vision = recipe.model.vision;
  image::ClipImageProcessorConfig processor;
  processor.shortest_edge = processor.crop_height = processor.crop_width = vision.image_size;
  const auto& init_from = recipe.model.init_from;
  std::string file;
  if (init_from.rfind("hf:", 0) == 0) {
    file = (std::filesystem::path(init_from.substr(3)) / "preprocessor_config.json").string();
    if (std::filesystem::exists(file)) processor = image::load_clip_image_processor_config(file);
  }
  if (processor.crop_height != vision.image_size || processor.crop_width != vision.image_size)
    throw InputError(fmt::format("{}: crop_size {}x{}, but the vision tower takes {}x{} images: set crop_size to {}",
                                 file, processor.crop_height, processor.crop_width, vision.image_size,
                                 vision.image_size, vision.image_size));
  return processor;
}

std::unique_ptr<data::SampleDataset> load_image_chat(const std::string& source, const text::Tokenizer& tokenizer,
                                                     const config::Recipe& recipe, bool shuffle) {
  if (data::is_source_list(source) || std::filesystem::path(source).extension() != ".jsonl")
    throw InputError("model.family llava reads image chat: one .jsonl file of records with \"messages\" and "
                     "\"images\" (see docs/data.md, Image chat)");
  data::ImageChatOptions options;
  options.seq_len = recipe.data.seq_len;
  options.seed = static_cast<uint64_t>(recipe.run.seed);
  options.shuffle = shuffle;
  options.chat_template = recipe.data.chat_template;
  options.placeholder.id = recipe.model.vision.image_token_index;
  options.placeholder.tokens = recipe.model.vision.features_per_image();
  options.processor = image_processor(recipe);
  options.skip_bad_images = recipe.data.skip_bad_images;
  options.workers = torch::get_num_threads();
  return std::make_unique<data::ImageChatDataset>(source, tokenizer, options);
}

// (image, caption) pairs for a contrastive model, each caption closed where its text tower pools:
// at the tokenizer's end-of-text id, which must be the one config.json names (with eos_token_id
// 2, transformers' older rule, the row's highest id: an end-of-text id above every other id).
std::unique_ptr<data::SampleDataset> load_image_text(const std::string& source, const text::Tokenizer& tokenizer,
                                                     const config::Recipe& recipe, bool shuffle) {
  if (data::is_source_list(source) || std::filesystem::path(source).extension() != ".jsonl")
    throw InputError(fmt::format("model.family {} reads (image, caption) pairs: one .jsonl file of records with "
                                 "\"image\" and \"caption\" (see docs/models.md, Contrastive image-text)",
                                 recipe.model.family));
  const int64_t eos = recipe.model.contrastive.eos_token_id;
  if (eos != 2 && eos != tokenizer.eos_id())
    throw InputError(fmt::format("model.init_from's text_config eos_token_id is {}, where the text tower pools, but "
                                 "data.tokenizer '{}' ends text with {}: use the model's tokenizer, or a model whose "
                                 "eos_token_id is {}",
                                 eos, recipe.data.tokenizer, tokenizer.eos_id(), tokenizer.eos_id()));
  data::ImageTextOptions options;
  options.seq_len = recipe.data.seq_len;
  options.end_id = tokenizer.eos_id();
  options.processor = image_processor(recipe);
  options.seed = static_cast<uint64_t>(recipe.run.seed);
  options.shuffle = shuffle;
  return std::make_unique<data::ImageTextDataset>(source, tokenizer, options);
}

}  // namespace

std::unique_ptr<data::SampleDataset> load_recipe_dataset(const std::string& key, const std::string& source,
                                                         const text::Tokenizer& tokenizer,
                                                         const config::Recipe& recipe, bool shuffle) {
  data::DatasetOptions options;
  options.seq_len = recipe.data.seq_len;
  options.seed = static_cast<uint64_t>(recipe.run.seed);
  options.shuffle = shuffle;
  options.chat_template = recipe.data.chat_template;
  options.workers = torch::get_num_threads();
  options.cache_dir = recipe.data.cache_dir;
  options.tokenizer_spec = recipe.data.tokenizer;
  options.objective = config::to_string(recipe.data.objective);
  const bool spans = recipe.data.objective == config::Objective::span_corruption;
  const auto span_lengths = data::span_corruption_lengths(recipe.data.seq_len, recipe.data.noise_density,
                                                          recipe.data.mean_noise_span_length);
  if (spans) options.seq_len = span_lengths.expanded - 1;  // windows of the expanded length
  std::unique_ptr<data::SampleDataset> dataset;
  try {
    if (model::model_spec(recipe.model.family).capabilities.contrastive)
      return load_image_text(source, tokenizer, recipe, shuffle);
    if (recipe.model.vision.enabled()) return load_image_chat(source, tokenizer, recipe, shuffle);
    if (model::model_spec(recipe.model.family).capabilities.image_classes) {
      // Training images only are augmented.
      const auto augment = key == "data.train"
                               ? data::ImageAugment{recipe.data.crop_scale, recipe.data.crop_ratio, recipe.data.hflip}
                               : data::ImageAugment{};
      data::ImageClassOptions images{recipe.model.vocab_size, recipe.model.vision.image_size, options.seed, shuffle,
                                     augment};
      return std::make_unique<data::ImageClassDataset>(source, images);
    }
    if (recipe.data.objective == config::Objective::dpo)
      return std::make_unique<data::PreferenceDataset>(
          data::read_preference_pairs(source, tokenizer, recipe.data.seq_len, recipe.data.chat_template),
          recipe.data.seq_len, tokenizer.eos_id(), options.seed, shuffle);
    dataset = data::load_dataset(source, tokenizer, options);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{} ({}): {}", key, source, e.what()));
  }
  if (spans) return std::make_unique<data::SpanCorruptionDataset>(std::move(dataset), span_options(tokenizer, recipe));
  if (recipe.data.objective != config::Objective::mlm) return dataset;
  return std::make_unique<data::MaskedLmDataset>(std::move(dataset), masked_lm_options(tokenizer, recipe));
}

data::MaskedLmOptions masked_lm_options(const text::Tokenizer& tokenizer, const config::Recipe& recipe) {
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

data::SpanCorruptionOptions span_options(const text::Tokenizer& tokenizer, const config::Recipe& recipe) {
  data::SpanCorruptionOptions options;
  options.noise_density = recipe.data.noise_density;
  options.mean_noise_span_length = recipe.data.mean_noise_span_length;
  options.input_length = recipe.data.seq_len;
  options.vocab_size = recipe.model.vocab_size > 0 ? recipe.model.vocab_size : tokenizer.vocab_size();
  options.eos_id = tokenizer.eos_id();
  options.pad_id = recipe.model.pad_token_id;
  options.seed = static_cast<uint64_t>(recipe.run.seed);
  const auto lengths = data::span_corruption_lengths(options.input_length, options.noise_density,
                                                     options.mean_noise_span_length);
  // The sentinels are the vocabulary's last ids (T5's <extra_id_N>): the tokenizer's own ids
  // must stay below them.
  if (tokenizer.vocab_size() > options.vocab_size - lengths.noise_spans)
    throw InputError(fmt::format("data.objective span_corruption: {} noise spans a sample take the sentinel ids {} .. "
                                 "{}, but tokenizer '{}' has {} ids: set model.vocab_size to at least {}",
                                 lengths.noise_spans, options.vocab_size - lengths.noise_spans,
                                 options.vocab_size - 1, recipe.data.tokenizer, tokenizer.vocab_size(),
                                 tokenizer.vocab_size() + lengths.noise_spans));
  return options;
}

}  // namespace xtrain::train
