// An image classifier (model.family vit) reads images with integer labels: its shape comes from
// a Hugging Face folder (the image and patch sizes have no recipe keys), its target is each
// image's label (the default objective, no masking or preference pairs), data.seq_len is the
// tokens its encoder sees per image (the step report's token counts and the memory estimate
// count them), and one image is one row (no packing). Its augmentation keys (data.crop_scale,
// data.hflip) are its alone. docs/models.md, Image classification.
#include <fmt/format.h>

#include "config/recipe_rule.h"
#include "model/spec/model_spec.h"

namespace xtrain::config::rules {

void image_classes(const RuleContext& c) {
  const auto& r = c.recipe;
  const auto* spec = model::find_model_spec(r.model.family);
  if (!spec || !spec->capabilities.image_classes) {
    const char* key = !r.data.crop_scale.empty() ? "data.crop_scale" : r.data.hflip > 0 ? "data.hflip" : nullptr;
    if (key)
      c.refuse(key, fmt::format("crops and mirrors the images of an image classifier (model.family vit), and "
                                "model.family {} is not one: leave it out",
                                r.model.family));
    return;
  }
  if (r.model.init_from.rfind("hf:", 0) != 0) {
    c.refuse("model.family",
             fmt::format("{} takes its image size, patch size and labels from a Hugging Face folder: set "
                         "model.init_from: hf:DIR to a folder of a {} model (config.json and model.safetensors)",
                         r.model.family, spec->hf_architecture));
    return;
  }
  if (r.data.objective != Objective::clm)
    c.refuse("data.objective", fmt::format("{} learns each image's label: leave data.objective out (clm, the default)",
                                           r.model.family));
  if (r.data.seq_len != r.model.max_seq_len)
    c.refuse("data.seq_len", fmt::format("{} sees {} tokens an image (its patches and the class token): set "
                                         "data.seq_len {}",
                                         r.model.family, r.model.max_seq_len, r.model.max_seq_len));
  if (r.data.pack) c.refuse("data.pack", "an image classifier reads one image a row: set data.pack false");
  if (r.model.vision.num_channels != 3)
    c.refuse("model.init_from", fmt::format("config.json's num_channels is {}; xtrain reads RGB images (3 channels)",
                                            r.model.vision.num_channels));
}

}  // namespace xtrain::config::rules
