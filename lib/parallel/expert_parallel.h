// Expert parallelism as a step of parallelising a model (parallel.ep > 1): each MoE block of the
// model dispatches its tokens over the mesh's "ep" group (parallel/expert_dispatch.h) and keeps
// only its rank's experts; in the shard plan, each such block's experts become a unit of their
// own, sharded over "edp" (the data ranks holding the same experts) with no replicas, and
// placed in the whole [E, ...] tensors, so that initialisation, Hugging Face folders and
// checkpoints see every layout's experts by the same names and offsets. The dense part of the
// block stays the model's unit (sharded over fsdp, replicated over dp).
//
// Gradients need no extra scale: a rank's expert gradients hold the contributions of every
// token of its ep group routed to them (the combine's backward brings them back), and the
// reduction over edp adds those of the other groups, so that each expert's gradient is the
// sum over all data ranks, as every other parameter's is.
#pragma once
#include <memory>
#include <vector>

#include "model/causal_lm.h"
#include "model/shard_plan.h"
#include "parallel/device_mesh.h"
#include "parallel/expert_dispatch.h"

namespace xtrain::parallel {

// Applies expert parallelism to `model` (before it is sharded or materialised) and returns `plan`
// (the model's, or an earlier step's) with each MoE block's unit split in two: the dense part,
// and this rank's experts, sharded over "edp". The model must have experts that split evenly over
// ep; under tensor parallelism those are the tp rank's experts (model/layers/moe.h), which ep splits
// further: each rank of a (tp, ep) pair holds E / (tp x ep) of them.
// micro_batches: parallel.intra_layer_micro_batch (Domino-EP, model::TokenDispatcher).
// installed: where given, receives the dispatchers (one a block), whose clocks the caller reads.
model::ShardPlan apply_expert_parallel(model::CausalLM& model, const DeviceMesh& mesh, model::ShardPlan plan,
                                       int64_t micro_batches = 1,
                                       std::vector<std::shared_ptr<const ExpertDispatcher>>* installed = nullptr);

}  // namespace xtrain::parallel
