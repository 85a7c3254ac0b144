// The split backward of the zero-bubble pipeline schedules (train/pipeline_schedule.h), after
// Megatron's WeightGradStore: a Linear that forwards while a store is installed on its thread
// (WeightGradStore::Scope) computes in backward only its input's and bias's gradients, and leaves
// its weight's to the store as a record (input, output gradient, weight). The schedule's B pass
// is that backward, which the previous stage waits for; its W pass runs the records, each adding
// grad_output^T input to weight.grad (the buffer the data-parallel reduction reads) as autograd's
// accumulation would. Every other parameter (norms, embeddings, the experts' GEMMs) and any
// weight that is not a leaf (a view of a tensor-parallel slice), or whose product runs in fp16
// emulation, FP8, widened bf16 or under autocast, gets its gradient in the backward as always.
#pragma once
#include <mutex>
#include <utility>
#include <vector>

#include <torch/types.h>

namespace xtrain::model {

struct DeferredWeightGrad {
  torch::Tensor input, grad_output, weight;
  void run() const;  // weight.grad += grad_output^T input, over every leading dimension
};

class WeightGradStore {
 public:
  // Linear layers that forward on this thread while a Scope is alive defer to `store`.
  class Scope {
   public:
    explicit Scope(WeightGradStore& store);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    WeightGradStore* previous_;
  };
  static WeightGradStore* current();
  // Whether a product of x and weight defers its weight gradient here.
  static bool defers(const torch::Tensor& x, const torch::Tensor& weight);

  void push(DeferredWeightGrad record);   // from a backward, on whichever thread autograd runs it
  std::vector<DeferredWeightGrad> take();  // what backwards pushed since the last take

 private:
  std::mutex mutex_;
  std::vector<DeferredWeightGrad> pending_;
};

// x W^T + b whose backward leaves W's gradient to `store` (WeightGradStore::defers holds).
torch::Tensor deferred_weight_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                                     WeightGradStore& store);

}  // namespace xtrain::model
