// The model-level figures of a decoder's MoE layers, from the reports its layers write during a
// forward (DecoderLayerImpl::RoutingReport): the expert loads and drops, one row per MoE layer,
// and the router losses summed over the layers. The balancing loss is deferred when its
// gradient in one layer depends on more than that layer's forward (every layer's counts, or
// every rank's): the layers then attach it with rows of coefficients that collect_routing fills
// in at the forward's end (model/layers/aux_loss.h).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include <torch/types.h>

#include "model/decoder_layer.h"
#include "model/model_output.h"
#include "model/spec/model_config.h"

namespace xtrain::model {

using RoutingReport = DecoderLayerImpl::RoutingReport;

// Sums a tensor in place over a group of ranks; empty: this rank's alone (CausalLM's hooks).
using RankSum = std::function<void(torch::Tensor&)>;

// Whether the balancing loss is deferred, given whether the micro batch spans context ranks.
bool balance_deferred(const ModelConfig& config, bool over_context_ranks);

// forward's figures, from the report of every layer (index = layer); `coefficients` [layers, E]
// is the deferred loss's (undefined when not deferred), filled here.
void collect_routing(const ModelConfig& config, const std::vector<RoutingReport>& reports,
                     const torch::Tensor& coefficients, const RankSum& sum_over_data_ranks,
                     const RankSum& sum_over_context_ranks, ModelOutput& output);

// A pipeline chunk's, from the reports of its layers from first_layer on: rows of every MoE
// layer of the model (zeros for other chunks' layers) and the chunk's share of each loss; a
// deferred balancing loss (context parallelism) fills the chunk's rows of `coefficients`.
void chunk_routing(const ModelConfig& config, const std::vector<RoutingReport>& reports, int64_t first_layer,
                   const torch::Tensor& coefficients, const RankSum& sum_over_context_ranks,
                   const torch::Device& device, ModelOutput& output);

}  // namespace xtrain::model
