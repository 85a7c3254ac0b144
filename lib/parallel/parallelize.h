// parallelize(): lays a single-device model out over the mesh, in one fixed order that reads top
// to bottom (torchtitan's parallelize_llama):
//   0. precision: FP8 on the linear layers and experts (model::apply_float8);
//   1. the memory policy: recompute, activation offload, the attention kernel, which context
//      parallelism (cp > 1) wraps for attention over the whole row;
//   2. tensor (and sequence) parallelism, which turns the model's shard plan into slices;
//   3. expert parallelism, which splits each MoE block's experts over "ep";
//   4. pipeline stages (pp > 1), or else full sharding over the data ranks (FSDP, HSDP or DDP);
//      one process keeps the model whole.
// Each step takes the plan the steps before it made and returns it transformed. The model comes
// unmaterialised (model::place_unmaterialized): the last step fills only what this rank keeps,
// from `source`.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "memory/memory_policy.h"
#include "model/causal_lm.h"
#include "model/layers/float8_linear.h"
#include "model/layers/parameter_source.h"
#include "parallel/device_mesh.h"
#include "parallel/parallel_model.h"

namespace xtrain::parallel {

struct ParallelizeOptions {
  memory::MemoryOptions memory;
  bool sequence_parallel = false;          // parallel.sequence_parallel (tp > 1)
  int64_t expert_micro_batches = 1;        // parallel.intra_layer_micro_batch (Domino-EP)
  int64_t virtual_stages = 1;              // parallel.pp_virtual_stages
  bool pipeline_v_shape = false;           // parallel.pp_schedule zbv: rank r runs chunks r and 2 pp - 1 - r
  std::vector<int64_t> pipeline_layers;    // parallel.pp_layers: each chunk's layers; empty: balanced
  bool reshard_after_forward = true;       // parallel.reshard_after_forward
  bool router_aux_loss_global_average = false;  // model.router_aux_loss_global_average
  ContextKind context_kind = ContextKind::ring;  // parallel.cp_kind (cp > 1)
  model::Float8Recipe float8;                    // precision.fp8
  bool float8_all_gather = false;                // precision.fp8_all_gather, where it applies
};

std::unique_ptr<ParallelModel> parallelize(std::shared_ptr<model::CausalLM> model, const DeviceMesh& mesh,
                                           const ParallelizeOptions& options, const model::ParameterSource& source);

}  // namespace xtrain::parallel
