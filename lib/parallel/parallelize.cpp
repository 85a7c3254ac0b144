#include "parallel/parallelize.h"

#include <optional>
#include <utility>

#include "model/spec/model_spec.h"
#include "parallel/context_parallel.h"
#include "parallel/expert_parallel.h"
#include "parallel/fully_sharded.h"
#include "parallel/pipeline_stage.h"
#include "parallel/tensor_parallel.h"
#include "util/numeric_fault.h"
#include "parallel/tensor_parallel_plan.h"

namespace xtrain::parallel {

std::unique_ptr<ParallelModel> parallelize(std::shared_ptr<model::CausalLM> model, const DeviceMesh& mesh,
                                           const ParallelizeOptions& options, const model::ParameterSource& source) {
  const auto float8_weights = model::apply_float8(*model, options.float8);
  const bool ring = mesh.size(Dim::cp) > 1 && options.context_kind == ContextKind::ring;
  const auto ring_times = ring ? std::make_shared<RingTimes>() : nullptr;
  const auto context_kernel =
      mesh.size(Dim::cp) > 1
          ? context_parallel_kernel(mesh, options.context_kind, options.memory.attention_block_size, ring_times)
          : memory::KernelWrap();
  auto offloader = memory::apply_memory_policy(*model, options.memory, context_kernel);
  std::unique_ptr<ParallelModel> laid_out;
  if (mesh.world().size == 1) {
    model::materialize(*model, source);
    laid_out = std::make_unique<WholeModel>(std::move(model));
    laid_out->set_offloader(std::move(offloader));
    return laid_out;
  }
  // Routing statistics: of the global batch (every token rank's), or of each micro batch, whose
  // tokens the cp ranks share.
  if (options.router_aux_loss_global_average)
    model->sum_over_data_ranks = [group = mesh.flatten({Dim::dp, Dim::fsdp, Dim::cp})](torch::Tensor& tensor) {
      group->all_reduce_sum(tensor).wait();
    };
  // Contrastive negatives from the global batch: every data rank's pairs (rules/contrastive.cpp
  // refuses the layouts that split a pair's computation further).
  if (model::model_spec(model->config().family).capabilities.contrastive &&
      !util::numeric_fault().is(util::NumericFaultKind::local_negatives))
    model->gather_over_data_ranks = [group = mesh.flatten({Dim::dp, Dim::fsdp})](const torch::Tensor& rows) {
      return gather_sequence(group, rows, 0);
    };
  if (mesh.size(Dim::cp) > 1)
    model->sum_over_context_ranks = [group = mesh.group(Dim::cp)](torch::Tensor& tensor) {
      group->all_reduce_sum(tensor).wait();
    };

  model::ShardPlan plan = model->shard_plan();
  if (mesh.size(Dim::tp) > 1) plan = apply_tensor_parallel(*model, mesh, std::move(plan), options.sequence_parallel);
  std::vector<std::shared_ptr<const ExpertDispatcher>> dispatchers;
  if (mesh.size(Dim::ep) > 1)
    plan = apply_expert_parallel(*model, mesh, std::move(plan), options.expert_micro_batches, &dispatchers);
  if (options.float8_all_gather) plan.float8_gathered = float8_weights;

  if (mesh.size(Dim::pp) > 1)
    laid_out = std::make_unique<PipelineStage>(
        std::move(model), std::move(plan), mesh,
        config::PipelinePlacement{mesh.size(Dim::pp), options.virtual_stages, options.pipeline_v_shape,
                                  options.pipeline_layers},
        options.reshard_after_forward, source);
  else
    laid_out = std::make_unique<FullyShardedModel>(std::move(model), mesh, options.reshard_after_forward, source,
                                                   std::move(plan));
  laid_out->set_offloader(std::move(offloader));
  laid_out->set_ring_times(ring_times);
  laid_out->set_expert_dispatchers(std::move(dispatchers));
  return laid_out;
}

}  // namespace xtrain::parallel
