#include "train/qk_clip_layers.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include "util/input_error.h"

namespace xtrain::train {

namespace {

// This rank's pieces of `prefix`.weight and `prefix`.bias.
std::vector<optim::QkClipPiece> pieces_of(const TrainedParameters& trained, const std::string& prefix) {
  std::vector<optim::QkClipPiece> pieces;
  for (size_t i = 0; i < trained.optimized.size(); ++i) {
    const auto& name = trained.optimized[i].name;
    if (name != prefix + ".weight" && name != prefix + ".bias") continue;
    const auto& layout = trained.layouts[i];
    TORCH_CHECK(layout.sizes == layout.shape, "QK-clip: ", name, " is a slice of its tensor");
    pieces.push_back({trained.optimized[i].tensor, layout.begin, layout.box_numel()});
  }
  return pieces;
}

}  // namespace

std::unique_ptr<optim::QkClip> make_qk_clip(model::CausalLM& model, const TrainedParameters& trained, double tau,
                                            std::shared_ptr<parallel::Comm> world, torch::Device device) {
  std::vector<optim::QkClipLayer> layers;
  for (const auto& [name, attention] : model.attention_layers()) {
    const auto refusal = attention->qk_clip_refusal();
    if (!refusal.empty())
      throw InputError(fmt::format("optim.muon.qk_clip_tau: {} is {}; QK-clip scales grouped-query attention's own "
                                   "q and k projections: set optim.muon.qk_clip_tau 0",
                                   name, refusal));
    attention->record_logit_max(true);
    layers.push_back({name, attention->num_heads(), attention->num_kv_heads(),
                      [attention = attention] { return attention->take_logit_max(); },
                      pieces_of(trained, name + ".q_proj"), pieces_of(trained, name + ".k_proj")});
  }
  if (layers.empty())
    throw InputError("optim.muon.qk_clip_tau: the model has no grouped-query attention layer to clip; set it to 0");
  optim::MaxOverRanks max_over_ranks;
  if (world && world->size() > 1)
    max_over_ranks = [world](torch::Tensor& t) {
      auto every = torch::empty({world->size() * t.numel()}, t.options());
      world->all_gather(every, t.contiguous()).wait();
      t = std::get<0>(every.view({world->size(), -1}).max(0));
    };
  return std::make_unique<optim::QkClip>(std::move(layers), tau, std::move(max_over_ranks), device);
}

}  // namespace xtrain::train
