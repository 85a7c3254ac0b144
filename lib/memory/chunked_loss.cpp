#include "memory/chunked_loss.h"

#include <algorithm>

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include "model/kernels/widened_gemm.h"

namespace xtrain::memory {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class ChunkedCrossEntropy : public torch::autograd::Function<ChunkedCrossEntropy> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& hidden, const torch::Tensor& weight,
                               const torch::Tensor& bias, const torch::Tensor& targets, int64_t chunk_tokens, int64_t ignore_index,
                               bool grad_enabled, bool autocast_matmuls, c10::ScalarType autocast_dtype,
                               const VocabParallel& vocab, WeightGrad weight_grad_target) {
    // Softmax, loss and gradient accumulation run in at least fp32; under autocast (bf16, or fp16
    // on CUDA) the two chunk matmuls take its dtype's operands (fp32 accumulation inside the
    // GEMM), as autocast would.
    const auto compute = at::promote_types(at::promote_types(hidden.scalar_type(), weight.scalar_type()),
                                           torch::kFloat32);
    const auto matmul_type = autocast_matmuls ? autocast_dtype : compute;
    // Grad mode is always off inside forward, so the caller's is passed in: under NoGradGuard
    // only the loss is computed.
    const bool want_hidden = grad_enabled && hidden.requires_grad();
    const bool want_weight = grad_enabled && weight.requires_grad();
    const bool has_bias = bias.numel() > 0;  // an empty tensor stands for none
    const bool want_bias = grad_enabled && has_bias && bias.requires_grad();

    const auto valid = targets.ne(ignore_index);
    // A device scalar, read by no one on the host: 1 / max(count, 1) (rows of a batch without
    // targets all weigh 0 anyway).
    const auto inv_count = valid.sum().clamp_min(1).to(compute).reciprocal();

    // One converted copy of the weight for the whole call; a no-op for fp32.
    const auto w = weight.to(matmul_type);
    auto loss_sum = torch::zeros({}, w.options().dtype(compute));
    torch::Tensor grad_hidden, grad_weight, grad_bias;
    if (want_hidden) grad_hidden = torch::empty(hidden.sizes(), hidden.options());
    // Straight into a fresh .grad (zeros, so the sums are the same as in a buffer of our own).
    const bool into_fresh = want_weight && weight_grad_target == WeightGrad::into_fresh_grad && matmul_type == compute &&
                            weight.is_leaf() && weight.grad().defined() && weight.grad().scalar_type() == compute &&
                            weight.grad().sizes() == weight.sizes();
    if (into_fresh)
      grad_weight = weight.mutable_grad();
    else if (want_weight)
      grad_weight = torch::zeros(w.sizes(), w.options().dtype(compute));
    if (want_bias) grad_bias = torch::zeros({w.size(0)}, w.options().dtype(compute));

    const int64_t n = hidden.size(0);
    for (int64_t start = 0; start < n; start += chunk_tokens) {
      const int64_t rows = std::min(chunk_tokens, n - start);
      const auto row_valid = valid.narrow(0, start, rows);
      // This rank's targets: all of them, or (vocabulary-parallel) those in its rows. The others
      // gather index 0 (always in range) and are zeroed below.
      const auto local_targets = targets.narrow(0, start, rows) - vocab.first;
      const auto here = vocab.ops ? row_valid.logical_and(local_targets.ge(0)).logical_and(local_targets.lt(w.size(0)))
                                  : row_valid;
      const auto index = local_targets.masked_fill(here.logical_not(), 0).unsqueeze(1);
      const auto h = hidden.narrow(0, start, rows).to(matmul_type);

      // The chunk's [rows, V] logits: the only large buffer. Everything below works on it in
      // place (at::logsumexp would allocate a second one).
      auto z = model::widened_mm(h, w.t()).to(compute);
      if (has_bias) z.add_(bias.to(compute));
      auto target_logit = z.gather(1, index);
      auto max = z.amax(1, /*keepdim=*/true);
      if (vocab.ops) vocab.ops->all_reduce_max(max);
      auto sum_exp = z.sub_(max).exp_().sum(1, /*keepdim=*/true);  // z = exp(logits - max)
      if (vocab.ops) {  // the rows' sums over the whole vocabulary, and their target's logit, in one all-reduce
        auto both = torch::cat({sum_exp, target_logit.mul(here.unsqueeze(1).to(compute))}, 1);
        vocab.ops->all_reduce_sum(both);
        sum_exp = both.narrow(1, 0, 1);
        target_logit = both.narrow(1, 1, 1);
      }
      const auto lse = sum_exp.log().add_(max);
      const auto row_weight = row_valid.to(compute).mul_(inv_count).unsqueeze(1);  // d loss / d row loss
      loss_sum.add_((lse - target_logit).mul_(row_weight).sum());
      if (!want_hidden && !want_weight && !want_bias) continue;

      // d loss / d logits = row_weight * (softmax - onehot(target)), built in z.
      z.mul_(row_weight / sum_exp);
      z.scatter_add_(1, index, vocab.ops ? -row_weight * here.unsqueeze(1).to(compute) : -row_weight);
      if (want_bias) grad_bias.add_(z.sum(0));
      const auto dz = z.to(matmul_type);
      if (want_hidden) grad_hidden.narrow(0, start, rows).copy_(model::widened_mm(dz, w));
      if (want_weight) {
        if (matmul_type == compute)
          grad_weight.addmm_(dz.t(), h);
        else
          grad_weight.add_(model::widened_mm(dz.t(), h));
      }
    }

    // Held until backward in the inputs' dtypes: half the memory for bf16.
    if (want_weight) grad_weight = grad_weight.to(weight.scalar_type());
    if (want_bias) grad_bias = grad_bias.to(bias.scalar_type());
    if (into_fresh) {
      ctx->saved_data["scale_weight_grad"] = weight;
      grad_weight = torch::Tensor();
    } else if (want_weight && weight_grad_target != WeightGrad::to_autograd) {
      ctx->saved_data["add_weight_grad"] = weight;
    }
    ctx->save_for_backward({grad_hidden, grad_weight, grad_bias});
    return loss_sum;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const auto& grad_output = grad_outputs[0];
    // Scaled in place (no host read of grad_output, no second [V, H] buffer): backward runs
    // once, and once the graph frees the buffers they are uniquely owned, so autograd adopts
    // them as .grad instead of copying them.
    auto scaled = [&](const torch::Tensor& grad) {
      return grad.defined() ? grad.mul_(grad_output.to(grad.scalar_type())) : grad;
    };
    auto grad_weight = scaled(saved[1]);
    if (ctx->saved_data.count("scale_weight_grad")) {
      auto weight = ctx->saved_data["scale_weight_grad"].toTensor();
      weight.mutable_grad().mul_(grad_output.to(weight.grad().scalar_type()));
    } else if (ctx->saved_data.count("add_weight_grad") &&
               add_to_existing_grad(ctx->saved_data["add_weight_grad"].toTensor(), grad_weight)) {
      grad_weight = torch::Tensor();
    }
    return {scaled(saved[0]), grad_weight, scaled(saved[2]), torch::Tensor(), torch::Tensor(), torch::Tensor(),
            torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }

 private:
  // What AccumulateGrad would do, done here so that the engine never holds the [V, H] gradient:
  // a tied table is used again by the embedding lookup, whose gradient the engine would wait
  // for, holding this one, through the whole backward pass.
  static bool add_to_existing_grad(const torch::Tensor& weight, const torch::Tensor& grad) {
    if (!weight.is_leaf() || !weight.requires_grad() || torch::GradMode::is_enabled()) return false;
    auto& existing = weight.mutable_grad();
    if (!existing.defined() || existing.sizes() != grad.sizes() || existing.scalar_type() != grad.scalar_type())
      return false;
    existing.add_(grad);
    return true;
  }
};

}  // namespace

torch::Tensor chunked_cross_entropy(const torch::Tensor& hidden, const torch::Tensor& weight,
                                    const torch::Tensor& targets, int64_t chunk_tokens, int64_t ignore_index,
                                    const VocabParallel& vocab, const torch::Tensor& bias,
                                    WeightGrad weight_grad) {
  TORCH_CHECK(hidden.dim() == 2 && weight.dim() == 2 && hidden.size(1) == weight.size(1),
              "chunked_cross_entropy: expected hidden [N, H] and weight [V, H], got ", hidden.sizes(), " and ",
              weight.sizes());
  TORCH_CHECK(targets.dim() == 1 && targets.size(0) == hidden.size(0) && targets.scalar_type() == torch::kLong,
              "chunked_cross_entropy: expected int64 targets [", hidden.size(0), "], got ", targets.sizes(), " ",
              targets.scalar_type());
  TORCH_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == weight.size(0)),
              "chunked_cross_entropy: expected bias [", weight.size(0), "], got ", bias.sizes());
  TORCH_CHECK(chunk_tokens > 0, "chunked_cross_entropy: chunk_tokens must be positive, got ", chunk_tokens);
  // The loss picks its own precisions (see forward); autocast inside would also turn the
  // softmax's elementwise work to bf16 / fp16. Autocast of the inputs' device decides.
  const auto device_type = hidden.device().type();
  const bool autocast_matmuls = at::autocast::is_autocast_enabled(device_type);
  const auto autocast_dtype = at::autocast::get_autocast_dtype(device_type);
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  // autograd::Function takes no undefined tensor: none is an empty one.
  const auto bias_or_empty = bias.defined() ? bias : torch::empty({0}, weight.options());
  return ChunkedCrossEntropy::apply(hidden, weight, bias_or_empty, targets, chunk_tokens, ignore_index,
                                    torch::GradMode::is_enabled(), autocast_matmuls, autocast_dtype, vocab,
                                    weight_grad);
}

}  // namespace xtrain::memory
