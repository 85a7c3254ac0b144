// Data parallelism for the Llama model: FSDP (ZeRO-3), HSDP, or DDP, by the device mesh's
// degrees. Each transformer block is a shard unit, and so are the embeddings, final norm and
// output projection together (the root unit, gathered for the whole micro batch since both ends
// of the model use it). During forward a block's parameters are gathered just before it runs
// while the next block's gather is already in flight (prefetch), and freed after it
// (reshard_after_forward); backward gathers them again, one block ahead, and starts the
// reduction of a block's gradients as soon as its backward is done, overlapping the rest.
// With fsdp = 1 nothing is gathered and each block's gradients are all-reduced over the replicas
// as soon as they are final: DDP with one bucket per block.
//
// Per micro batch: begin_micro_batch(last) before forward, end_micro_batch() after backward.
// The optimizer works on parameters(): this rank's pieces of every parameter, whose gradients
// hold the data-parallel mean after the last micro batch.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "dist/device_mesh.h"
#include "dist/shard_unit.h"
#include "model/llama.h"

namespace xtrain::dist {

class FullyShardedModel {
 public:
  FullyShardedModel(model::LlamaForCausalLM model, DeviceMesh mesh, bool reshard_after_forward);
  ~FullyShardedModel();

  std::vector<ParameterShard*> parameters();
  const DeviceMesh& mesh() const { return mesh_; }

  void begin_micro_batch(bool last);
  void end_micro_batch();
  void zero_grad();
  // The global gradient norm (over all shards) before clipping; clips to max_norm when > 0.
  double clip_grad_norm(double max_norm);

  // Forward passes outside training (evaluation): gathers the root unit until end_inference().
  void begin_inference();
  void end_inference();

  // Bytes of parameters, gradients and gathered buffers held now, and the most held at once.
  int64_t resident_bytes() const;
  int64_t peak_resident_bytes() const { return peak_bytes_; }

  // Hooks for the block runner.
  void before_block_forward(int64_t layer);
  void after_block_forward(int64_t layer);
  void before_block_backward(int64_t layer);
  void after_block_backward(int64_t layer);

 private:
  void note_peak();

  model::LlamaForCausalLM model_;
  DeviceMesh mesh_;
  bool reshard_after_forward_;
  std::unique_ptr<ShardUnit> root_;
  std::vector<std::unique_ptr<ShardUnit>> blocks_;
  bool last_micro_batch_ = true;
  int64_t peak_bytes_ = 0;
};

}  // namespace xtrain::dist
