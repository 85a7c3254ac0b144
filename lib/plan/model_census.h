// ModelCensus: a model's parameters counted by what they do, layer by layer, and the widths its
// activations and FLOPs follow: what the planner (plan/memory_estimate.h,
// plan/step_time_estimate.h) needs to know of any family. train::model_census fills it from the
// model itself, built without storage, so that every family's own layers are counted exactly.
#pragma once
#include <cstdint>
#include <vector>

namespace xtrain::plan {

struct LayerCensus {
  int64_t attention = 0;       // the attention block's matrices
  int64_t dense = 0;           // a dense MLP's matrices, or the shared experts'
  int64_t experts = 0;         // every routed expert's matrices
  int64_t active_experts = 0;  // the routed experts' matrices one token passes through
  int64_t other = 0;           // norms, biases, the router
  int64_t matrices() const { return attention + dense + experts; }
  int64_t total() const { return matrices() + other; }
};

// A weight matrix optim.name muon orthogonalises (optim::muon_takes): [rows, cols], `count` of
// them (an expert stack's experts), in decoder layer `layer` (-1: outside the layers).
struct MatrixCensus {
  int64_t rows = 0, cols = 0, count = 1, layer = -1;
  bool experts = false;
};

struct ModelCensus {
  int64_t embedding = 0;  // the token table
  int64_t head = 0;       // the output projection (0 when tied to the table)
  int64_t other = 0;      // final norm, a vision tower and projector
  std::vector<LayerCensus> layers;  // the decoder's, then multi-token prediction's depths
  int64_t prediction_depths = 0;     // the last entries of `layers` that are depths (model.mtp_layers)
  std::vector<MatrixCensus> muon_matrices;

  // Widths of one token's activations in a layer.
  int64_t hidden = 0;
  int64_t query_width = 0;  // heads x query/key head dim
  int64_t key_width = 0;    // kv heads x key head dim (latent attention: the latents)
  int64_t value_width = 0;  // heads x value head dim (the attention output)
  int64_t intermediate = 0;
  int64_t moe_intermediate = 0;
  int64_t experts = 0, top_k = 0, shared_experts = 0;
  int64_t vocab = 0;
  int64_t heads = 0;
  // How the router spreads the tokens: the busiest expert's routed tokens over the mean (what a
  // run reports as moe.load_ratio). The model does not say; 1 (balanced routing, which the
  // balancing losses aim at) unless the plan is told (`xtrain plan --expert-load-ratio`).
  double expert_load_ratio = 1;

  int64_t total() const {
    int64_t sum = embedding + head + other;
    for (const auto& layer : layers) sum += layer.total();
    return sum;
  }
  int64_t active() const {
    int64_t sum = embedding + head + other;
    for (const auto& layer : layers) sum += layer.total() - layer.experts + layer.active_experts;
    return sum;
  }
};

}  // namespace xtrain::plan
