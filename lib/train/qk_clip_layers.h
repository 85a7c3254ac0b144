// optim.muon.qk_clip_tau: the attention layers of `model` as QK-clip sees them (optim/qk_clip.h):
// each grouped-query attention layer set to record its heads' largest logits, with this rank's
// pieces of its q_proj and k_proj (weight and bias) from `trained`. The record is reduced over
// `world` by max, so that every rank clips the same heads. A layer of another kind (latent
// attention) or with q/k norms is an InputError naming optim.muon.qk_clip_tau; the recipe rules
// refuse those first.
#pragma once
#include <memory>

#include <torch/types.h>

#include "model/causal_lm.h"
#include "optim/qk_clip.h"
#include "parallel/comm.h"
#include "train/run_state.h"

namespace xtrain::train {

std::unique_ptr<optim::QkClip> make_qk_clip(model::CausalLM& model, const TrainedParameters& trained, double tau,
                                            std::shared_ptr<parallel::Comm> world, torch::Device device);

}  // namespace xtrain::train
