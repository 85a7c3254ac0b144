#include "model/llava/llava.h"

#include <string>

#include <torch/torch.h>

#include "model/spec/llava_family.h"
#include "model/layers/module_scope.h"

namespace xtrain::model {

ModelConfig llava_text_config(const ModelConfig& config) {
  ModelConfig text = config;
  text.family = "llama";
  text.vision = {};
  return text;
}

LlavaForConditionalGeneration::LlavaForConditionalGeneration(const ModelConfig& config) : CausalLM(config) {
  const auto& v = config.vision;
  TORCH_CHECK(v.enabled(), "llava without a vision tower");
  vision_tower = register_module("vision_tower", ClipVision(v));
  // The encoder layers past the feature layer compute nothing the model uses (transformers keeps
  // them too, and gives them no gradient): they take none here either, so no optimizer or
  // layout touches them.
  for (size_t i = static_cast<size_t>(v.feature_depth()); i < vision_tower->layers->size(); ++i)
    for (auto& parameter : (*vision_tower->layers)[i]->parameters()) parameter.requires_grad_(false);
  auto projector = module_scope(*this, "multi_modal_projector");
  linear_1 = projector->register_module("linear_1", Linear(v.hidden_size, config.hidden_size, true));
  linear_2 = projector->register_module("linear_2", Linear(config.hidden_size, config.hidden_size, true));
  language_model = register_module(
      "language_model", std::make_shared<LlamaForCausalLM>(llava_text_config(config), AttentionFeatures{}));
}

torch::Tensor LlavaForConditionalGeneration::image_features(const torch::Tensor& pixel_values) {
  const auto& v = config().vision;
  auto selected = vision_tower->hidden_states(pixel_values, v.feature_depth(), block_runner).back();
  if (v.feature_select == "default") selected = selected.narrow(1, 1, selected.size(1) - 1);  // no class token
  const auto projected = linear_2(torch::gelu(linear_1(selected)));
  return projected.reshape({-1, projected.size(-1)});
}

ModelOutput LlavaForConditionalGeneration::forward(const Batch& batch) {
  const auto& ids = batch.input_ids;
  const int64_t longest = batch.layout.packed() ? batch.layout.longest : ids.size(1);
  TORCH_CHECK(longest <= config().max_seq_len, "sequence of ", longest, " tokens exceeds model.max_seq_len ",
              config().max_seq_len);
  auto& text = *language_model->model;
  auto x = text.embed(ids, embed_runner);
  const auto placeholders = ids.eq(config().vision.image_token_index);
  const auto pixels = batch.extra_input("pixel_values");
  const int64_t slots = placeholders.sum().item<int64_t>();
  if (pixels.defined()) {
    const auto features = image_features(pixels);
    TORCH_CHECK(slots == features.size(0), "the batch has ", slots, " image placeholder tokens (id ",
                config().vision.image_token_index, ") for ", pixels.size(0), " images of ", features.size(0),
                " features in all");
    x = x.masked_scatter(placeholders.unsqueeze(-1), features.to(x.scalar_type()));
  } else {
    TORCH_CHECK(slots == 0, "the batch has ", slots, " image placeholder tokens and no pixel_values");
    if (block_runner) {
      // Under a block runner (FSDP) every rank must pass through every block, forward and
      // backward, or their gathers and reductions pair up wrongly: a batch without images runs
      // the tower on one blank image, whose features join the graph with weight zero.
      const auto& v = config().vision;
      const auto blank = torch::zeros({1, v.num_channels, v.image_size, v.image_size}, x.options());
      x = x + image_features(blank).sum() * 0.0;
    }
  }
  // The decoder layers come after the tower's blocks in block_runner's numbering.
  const int64_t offset = config().vision.feature_depth();
  BlockRunner shifted;
  if (block_runner)
    shifted = [this, offset](int64_t layer, const torch::Tensor& input, const BlockFn& block) {
      return block_runner(offset + layer, input, block);
    };
  x = text.run_layers(x, batch.layout, shifted, 0, config().num_layers, batch.loss_weight, {});
  ModelOutput output;
  output.hidden = text.norm(x);
  return output;
}

InitPlan LlavaForConditionalGeneration::init_plan() const {
  InitPlan plan;
  vision_tower->describe_init("vision_tower", plan);
  linear_1->describe_init("multi_modal_projector.linear_1", config().init_std, plan);
  linear_2->describe_init("multi_modal_projector.linear_2", config().init_std, plan);
  for (const auto& [name, init] : language_model->init_plan()) plan["language_model." + name] = init;
  return plan;
}

std::vector<EmbeddingImpl*> LlavaForConditionalGeneration::lookup_tables() {
  auto tables = language_model->lookup_tables();
  tables.push_back(vision_tower->position_embedding.get());
  return tables;
}

std::vector<std::pair<std::string, MoeBlockImpl*>> LlavaForConditionalGeneration::moe_blocks() const {
  auto blocks = language_model->moe_blocks();
  for (auto& [name, block] : blocks) name = "language_model." + name;
  return blocks;
}

void LlavaForConditionalGeneration::float8_layers(const std::string& name, Float8Layers& layers) {
  vision_tower->float8_layers(module_name(name, "vision_tower"), layers);
  layers.linears.emplace_back(module_name(name, "multi_modal_projector.linear_1"), linear_1.get());
  layers.linears.emplace_back(module_name(name, "multi_modal_projector.linear_2"), linear_2.get());
  language_model->float8_layers(module_name(name, "language_model"), layers);
}

ShardPlan LlavaForConditionalGeneration::shard_plan() {
  auto unit = [](const std::string& name, const torch::nn::Module& module) {
    ShardPlan::Unit u{name, {}, parallel::Dim::fsdp, parallel::Dim::dp, {}};
    for (const auto& item : module.named_parameters()) u.parameters.emplace_back(name + "." + item.key(), item.value());
    return u;
  };
  ShardPlan plan;
  std::vector<std::string> in_blocks;
  const int64_t depth = config().vision.feature_depth();
  for (int64_t i = 0; i < depth; ++i) {
    const std::string name = "vision_tower.encoder.layers." + std::to_string(i);
    plan.blocks.push_back({unit(name, *(*vision_tower->layers)[static_cast<size_t>(i)])});
    in_blocks.push_back(name + ".");
  }
  const auto& decoder = *language_model->model->layers;
  for (size_t i = 0; i < decoder.size(); ++i) {
    const std::string name = "language_model.model.layers." + std::to_string(i);
    plan.blocks.push_back({unit(name, *decoder[i])});
    in_blocks.push_back(name + ".");
  }
  plan.head = {"root", {}, parallel::Dim::fsdp, parallel::Dim::dp, {}};
  for (const auto& item : named_parameters()) {
    bool blocked = false;
    for (const auto& prefix : in_blocks) blocked = blocked || item.key().rfind(prefix, 0) == 0;
    if (!blocked) plan.head.parameters.emplace_back(item.key(), item.value());
  }
  return plan;
}

}  // namespace xtrain::model
