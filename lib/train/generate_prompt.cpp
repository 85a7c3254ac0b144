#include "train/generate_prompt.h"

#include <unistd.h>

#include <filesystem>

#include <fmt/format.h>
#include <torch/torch.h>

#include "config/recipe_loader.h"
#include "data/document_encoder.h"
#include "data/pixel_tensor.h"
#include "image/clip_image_processor.h"
#include "image/image_decode.h"
#include "text/chat_template.h"
#include "util/durable_file.h"
#include "util/input_error.h"

namespace xtrain::train {
namespace {

bool readable(const std::string& path) { return ::access(path.c_str(), R_OK) == 0; }

constexpr const char* kPlaceholder = "<image>";

int64_t count_placeholders(const std::string& text) {
  int64_t count = 0;
  for (size_t at = text.find(kPlaceholder); at != std::string::npos; at = text.find(kPlaceholder, at + 1)) ++count;
  return count;
}

torch::Tensor pixel_values(const std::vector<std::string>& images, const model::VisionConfig& vision,
                           const std::string& processor_file) {
  image::ClipImageProcessorConfig processor;
  processor.shortest_edge = processor.crop_height = processor.crop_width = vision.image_size;
  if (!processor_file.empty()) processor = image::load_clip_image_processor_config(processor_file);
  std::vector<torch::Tensor> pixels;
  for (const auto& file : images)
    pixels.push_back(data::pixel_tensor(image::preprocess(image::decode_image_file(file), processor)));
  return torch::stack(pixels);
}

}  // namespace

CheckpointDataSpec checkpoint_data_spec(const std::string& dir) {
  CheckpointDataSpec spec{"byte", "chatml", "", "", ""};
  if (readable(dir + "/preprocessor_config.json")) spec.image_processor = dir + "/preprocessor_config.json";
  const std::string recipe_file = dir + "/recipe.yaml";
  if (!readable(recipe_file)) {
    if (readable(dir + "/tokenizer.json"))
      spec.tokenizer = "hf:" + dir;
    else if (readable(dir + "/tokenizer.model"))
      spec.tokenizer = "sentencepiece:" + dir + "/tokenizer.model";
    return spec;
  }
  config::LoadOptions options;
  options.check_files = false;
  const auto recipe = config::load_recipe_text(util::read_file(recipe_file), recipe_file, options);
  spec.tokenizer = recipe.data.tokenizer;
  spec.chat_template = recipe.data.chat_template;
  const auto& init_from = recipe.model.init_from;
  if (init_from.rfind("hf:", 0) == 0) {
    const std::filesystem::path folder = init_from.substr(3);
    spec.base_model = folder.string();
    const std::string file = (folder / "preprocessor_config.json").string();
    if (spec.image_processor.empty() && readable(file)) spec.image_processor = file;
    if (readable((folder / "generation_config.json").string()))
      spec.generation_config = (folder / "generation_config.json").string();
  }
  return spec;
}

GeneratePrompt make_generate_prompt(const model::ModelConfig& config, const text::Tokenizer& tokenizer,
                                    const CheckpointDataSpec& spec, const PromptRequest& request,
                                    GenerateOptions& options) {
  const auto& vision = config.vision;
  if (!request.images.empty() && !vision.enabled())
    throw InputError(fmt::format("--image: a {} model takes no images; images need a vision-language model (llava)",
                                 config.family));
  std::string text = request.text;
  const auto images = static_cast<int64_t>(request.images.size());
  if (vision.enabled() && count_placeholders(text) == 0)
    for (int64_t i = 0; i < images; ++i) text = std::string(kPlaceholder) + "\n" + text;
  if (request.chat) {
    const auto chat_template = text::ChatTemplate::parse(spec.chat_template);
    text = chat_template.generation_prompt({{"user", text}});
    if (options.stop.empty()) options.stop = chat_template.end_of_turn();
  }
  if (!vision.enabled()) return {tokenizer.encode(text), {}};
  const data::ImagePlaceholder placeholder{kPlaceholder, vision.image_token_index, vision.features_per_image()};
  int64_t placeholders = 0;
  GeneratePrompt prompt{data::encode_with_images(tokenizer, text, placeholder, &placeholders), {}};
  if (placeholders != images)
    throw InputError(fmt::format("the prompt has {} \"{}\" placeholders but {} --image files were given: one "
                                 "placeholder per image",
                                 placeholders, kPlaceholder, images));
  if (images > 0) prompt.pixel_values = pixel_values(request.images, vision, spec.image_processor);
  return prompt;
}

}  // namespace xtrain::train
