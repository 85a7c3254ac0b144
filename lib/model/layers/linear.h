// Linear: y = x W^T + b, with its parameters declared without storage (model/layers/parameter_source.h)
// until the model is materialised. Under an Fp16EmulationScope the input, weight and output
// round through fp16 (model/kernels/fp16_emulation.h); with a Float8Recipe set (model::apply_float8) the
// product runs in FP8 (model/layers/float8_linear.h). With a LoRA adapter (add_adapter,
// model/layers/lora.h) the product adds scale x (dropout(x) A^T) B^T, PEFT's order of operations.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "model/layers/float8_linear.h"
#include "model/layers/keyed_dropout.h"
#include "model/layers/parameter_init.h"
#include "model/layers/tensor_parallel_ops.h"

namespace xtrain::model {

// A LoRA adapter's dropout on its input: keyed masks (model/layers/keyed_dropout.h) of the
// forward that runs, whose key the model sets (CausalLM::adapter_dropout_key) and keeps until its
// next forward, so that a block recomputed in backward draws its forward's masks again.
struct AdapterDropout {
  double p = 0;
  int64_t layer = 0;
  DropoutSite site{};
  std::shared_ptr<const DropoutKey> key;
  torch::Tensor apply(const torch::Tensor& x) const;
};

class LinearImpl : public torch::nn::Module {
 public:
  LinearImpl(int64_t in_features, int64_t out_features, bool bias);
  torch::Tensor forward(const torch::Tensor& x);
  // The layer's product with another form of its weight and bias (a tensor-parallel slice or a
  // wrapper of it), in the layer's precision.
  torch::Tensor project_with(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) const;
  // weight ~ N(0, std^2), bias 0, under the module's full name.
  // With an adapter, also lora_A ~ N(0, 1 / (3 in)) (the variance of PEFT's kaiming-uniform
  // A) and lora_B 0.
  void describe_init(const std::string& name, double std, InitPlan& plan) const;
  // Adds the submodules lora_A ([rank, in]) and lora_B ([out, rank]), declared without storage,
  // their input dropped as `dropout` says.
  void add_adapter(int64_t rank, double scale, AdapterDropout dropout = {});

  torch::Tensor weight;  // [out, in]
  torch::Tensor bias;    // [out], or undefined
  std::shared_ptr<const Float8Recipe> float8;  // null: high precision
  std::shared_ptr<LinearImpl> lora_A, lora_B;  // null: no adapter
  double lora_scale = 0;                       // alpha / rank
  AdapterDropout lora_dropout;

 private:
  torch::Tensor base_product(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) const;
};
TORCH_MODULE(Linear);

// A token embedding table [num_embeddings, dim], declared without storage like Linear's.
// Vocabulary-parallel when tensor_parallel is set: the table holds rows [first_row, first_row +
// rows) of the whole, ids outside them look up zeros, and the ranks' lookups are summed (with
// sequence parallelism, reduce-scattered along the sequence).
class EmbeddingImpl;

// A module that holds token lookups, or parts that do: each lists its own tables, by type, for
// the trainer's accumulate_lookup_grads_in_place.
class LookupTableOwner {
 public:
  virtual ~LookupTableOwner() = default;
  virtual std::vector<EmbeddingImpl*> lookup_tables() = 0;
};

class EmbeddingImpl : public torch::nn::Module, public LookupTableOwner {
 public:
  EmbeddingImpl(int64_t num_embeddings, int64_t dim);
  torch::Tensor forward(const torch::Tensor& ids);
  void describe_init(const std::string& name, double std, InitPlan& plan) const;  // ~ N(0, std^2)

  // Makes the lookup vocabulary-parallel over `ops`: this rank holds its split_share of the
  // `vocab_size` rows.
  void split_vocabulary(std::shared_ptr<TensorParallelOps> ops, int64_t vocab_size);

  torch::Tensor weight;
  std::shared_ptr<TensorParallelOps> tensor_parallel;
  int64_t first_row = 0;
  int64_t padding_idx = -1;  // a row whose lookups give it no gradient (-1: none)
  // For a backward() pass (never autograd::grad): when the table's .grad exists (an FSDP unit's
  // full gradient buffer), the lookup's backward adds to the rows it looked up, in place, instead
  // of handing autograd a dense gradient as large as the table.
  bool accumulate_grad_in_place = false;
  std::vector<EmbeddingImpl*> lookup_tables() override { return {this}; }
};
TORCH_MODULE(Embedding);

// Sets accumulate_grad_in_place on every lookup table of `model`: the trainer's, whose
// parameters' gradients are buffers that backward() accumulates into.
void accumulate_lookup_grads_in_place(LookupTableOwner& model);

}  // namespace xtrain::model
