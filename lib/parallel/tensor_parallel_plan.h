// Tensor parallelism as a step of parallelising a model (parallel.tp > 1), before expert
// parallelism and FSDP (torchtitan's order): the model's tensor-parallel plan slices each
// split parameter to this rank's share, the layers get the "tp" group's collectives
// (model::TensorParallelOps, with or without sequence parallelism), and the shard plan that FSDP
// then takes places every slice in its whole tensor. A parameter the plan leaves whole (a norm)
// is held by every tp rank: its placement counts tp copies, so that checkpoints write it once
// and the gradient norm counts it once.
//
// Gradients need no extra scale: every tp rank computes the same loss on the same data, and the
// collectives make each slice's gradient that of the whole model.
#pragma once
#include <memory>

#include "model/causal_lm.h"
#include "model/shard_plan.h"
#include "model/layers/tensor_parallel_ops.h"
#include "parallel/comm.h"
#include "parallel/device_mesh.h"

namespace xtrain::parallel {

// The layers' view of a tensor-parallel group (parallel/tensor_parallel.h's autograd collectives).
std::shared_ptr<model::TensorParallelOps> make_tensor_parallel_ops(std::shared_ptr<Comm> group,
                                                                   bool sequence_parallel);

// Applies tensor parallelism to `model` (before it is sharded or materialised) over the mesh's
// "tp" group: each sliced parameter keeps only this rank's slice, and `plan` (the model's, or an
// earlier step's) comes back with every parameter's placement, for FSDP or the pipeline to take.
model::ShardPlan apply_tensor_parallel(model::CausalLM& model, const DeviceMesh& mesh, model::ShardPlan plan,
                                       bool sequence_parallel);

}  // namespace xtrain::parallel
