// ParallelModel: a model as a rank trains it once parallelize() (parallel/parallelize.h) has laid
// it out over the mesh: whole on one process (WholeModel), fully sharded over the data ranks
// (FullyShardedModel: FSDP, HSDP or DDP, with tensor and expert parallelism inside its units),
// or one stage of a pipeline (PipelineStage). It is the one interface the trainer uses for what
// differs between layouts:
//   parameters()                 this rank's pieces: what the optimizer updates and checkpoints hold;
//   begin/end_micro_batch()      around each micro batch's forward and backward (pipelines run
//                                their chunks through their schedule instead);
//   finish_gradients()           after the step's last backward: every reduction complete;
//   zero_grad(), clip_grad_norm() over every rank's pieces;
//   begin/end_inference()        around forwards outside training (evaluation);
//   resident_bytes()             the parameters, gradients and gathered buffers held;
//   gathered_bytes()             what the parameter gathers have received so far;
//   comm_seconds()               the time blocked on the mesh's groups and the expert exchanges.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/causal_lm.h"
#include "parallel/expert_dispatch.h"
#include "parallel/ring_attention.h"
#include "parallel/shard_unit.h"

namespace xtrain::memory {
class ActivationOffloader;
}

namespace xtrain::parallel {

class Comm;
class DeviceMesh;
class PipelineStage;

// Seconds this rank has spent so far blocked on collectives: on every group of its mesh (what
// compute did not hide), on the tensor-parallel group, and in the expert exchanges forward and
// backward. A step's figures are the difference of two readings.
// Ring attention's time attending to blocks and blocked on their transfers (cp > 1, ring) are
// the pair that says how well the transfers hide.
struct CommSeconds {
  double blocked = 0, tensor_parallel = 0, expert_forward = 0, expert_backward = 0;
  double ring_attention = 0, ring_blocked = 0;
  // Collectives waited on: on every group of the mesh; on the tensor-parallel group; the experts'
  // exchanges; the ring's transfers.
  int64_t waits = 0, tensor_parallel_waits = 0, expert_waits = 0, ring_waits = 0;
  CommSeconds operator-(const CommSeconds& earlier) const;
};

class ParallelModel {
 public:
  // mesh: the groups whose blocked time comm_seconds() reports; none for one process.
  explicit ParallelModel(std::shared_ptr<model::CausalLM> model, const DeviceMesh* mesh = nullptr);
  virtual ~ParallelModel();
  ParallelModel(const ParallelModel&) = delete;
  ParallelModel& operator=(const ParallelModel&) = delete;

  model::CausalLM& model() { return *model_; }
  const model::CausalLM& model() const { return *model_; }

  virtual std::vector<ParameterShard*> parameters() = 0;
  // What each rank holds of the weights, for the start-up line: "whole", "its shards", ...
  virtual std::string weights_per_rank() const = 0;
  // True when this rank holds the whole model, which a checkpoint then stores as one file.
  virtual bool whole() const { return false; }
  // The number of shards a checkpoint of this layout has (0: not sharded).
  virtual int64_t checkpoint_shards() const { return 0; }
  // The pipeline stage, when the layout is one (its schedule runs the stage's chunks).
  virtual PipelineStage* pipeline_stage() { return nullptr; }
  // 1-bit Adam (optim/onebit_adam.h) exchanges compressed momenta in place of the replicas'
  // gradient all-reduce: whether this layout can switch that reduction off, and the switch.
  virtual bool switches_replica_reduction() const { return false; }
  virtual void set_replica_reduction(bool /*on*/) {}

  void begin_micro_batch(bool last);
  void end_micro_batch() { end_units(); }
  virtual void finish_gradients() {}
  // Whether the head's gradient buffers hold zeros from before each micro batch's loss until
  // its backward reaches them (memory::WeightGrad::into_fresh_grad).
  virtual bool fresh_head_gradients() const { return false; }
  virtual void zero_grad() = 0;
  // The global gradient norm (over every rank's pieces) before clipping; clips to max_norm > 0.
  virtual double clip_grad_norm(double max_norm) = 0;

  virtual void begin_inference() {}
  virtual void end_inference() {}

  // Bytes of parameters, gradients and gathered buffers held now, and the most held at once.
  virtual int64_t resident_bytes() const = 0;
  virtual int64_t peak_resident_bytes() const { return resident_bytes(); }
  // Bytes the parameter gathers so far have brought from other ranks (FSDP units).
  virtual int64_t gathered_bytes() const { return 0; }

  CommSeconds comm_seconds() const;

  // memory.offload_activations: the offloader whose slots each micro batch's forward starts afresh.
  void set_offloader(std::shared_ptr<memory::ActivationOffloader> offloader) { offloader_ = std::move(offloader); }
  // Ring attention's clock (parallel/ring_attention.h), read by comm_seconds().
  void set_ring_times(std::shared_ptr<const RingTimes> times) { ring_times_ = std::move(times); }
  // The expert dispatchers expert parallelism installed (parallel/expert_parallel.h), whose
  // blocked time comm_seconds() reports.
  void set_expert_dispatchers(std::vector<std::shared_ptr<const ExpertDispatcher>> dispatchers) {
    expert_dispatchers_ = std::move(dispatchers);
  }

 protected:
  virtual void begin_units(bool /*last*/) {}
  virtual void end_units() {}

  std::shared_ptr<model::CausalLM> model_;

 private:
  std::shared_ptr<memory::ActivationOffloader> offloader_;
  std::shared_ptr<const RingTimes> ring_times_;
  std::vector<std::shared_ptr<const ExpertDispatcher>> expert_dispatchers_;
  std::vector<std::shared_ptr<Comm>> groups_;  // each of the mesh's groups once
  std::shared_ptr<Comm> tensor_parallel_;
};

// One process holding the whole model, materialised: its parameters are the pieces.
class WholeModel final : public ParallelModel {
 public:
  explicit WholeModel(std::shared_ptr<model::CausalLM> model);

  std::vector<ParameterShard*> parameters() override;
  std::string weights_per_rank() const override { return "whole"; }
  bool whole() const override { return true; }
  void zero_grad() override;
  double clip_grad_norm(double max_norm) override;
  // The trainable parameters and their gradients (fp32).
  int64_t resident_bytes() const override;

 private:
  std::vector<ParameterShard> pieces_;
};

}  // namespace xtrain::parallel
