#include "parallel/ring_attention.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <vector>

#include <torch/torch.h>

#include "model/attention.h"
#include "model/span_attention.h"

namespace xtrain::parallel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using Clock = std::chrono::steady_clock;

// k/v blocks and their gradients travel as separate streams between the same neighbours.
constexpr int64_t kBlockTag = 0, kGradientTag = 1;

// What forward hands backward beside the tensors.
struct RingPlan : torch::CustomClassHolder {
  std::shared_ptr<Comm> comm;
  std::shared_ptr<const model::ContextShard> shard;
  std::vector<int64_t> bounds;  // the row's cu_seqlens
  int64_t block_size = 256;
  std::shared_ptr<RingTimes> times;

  int64_t rank() const { return comm->rank(); }
  int64_t ranks() const { return comm->size(); }
  // The rank whose block this one holds at ring step s.
  int64_t owner(int64_t s) const { return (rank() - s + ranks()) % ranks(); }
  model::SpanTiles tiles(int64_t owner, const torch::Device& device) const {
    return {shard->spans[static_cast<size_t>(rank())], shard->spans[static_cast<size_t>(owner)], bounds, block_size,
            device};
  }
};

int64_t nanoseconds_since(Clock::time_point started) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - started).count();
}

// Sends `block` to the next rank and receives the previous rank's into a new tensor.
struct Passing {
  torch::Tensor incoming;
  PendingCollective pending;
};
Passing pass_on(const RingPlan& plan, const torch::Tensor& block, int64_t tag) {
  Passing passing{torch::empty_like(block), {}};
  const int64_t next = (plan.rank() + 1) % plan.ranks(), previous = (plan.rank() + plan.ranks() - 1) % plan.ranks();
  passing.pending = plan.comm->send_recv({{PeerTransfer::Kind::send, block, next, tag},
                                          {PeerTransfer::Kind::recv, passing.incoming, previous, tag}});
  return passing;
}

torch::Tensor arrived(const RingPlan& plan, Passing& passing) {
  const auto started = Clock::now();
  passing.pending.wait();
  if (plan.times) plan.times->blocked_ns += nanoseconds_since(started);
  return passing.incoming;
}

// out, lse <- the softmax over the union of their keys and block's (whose out_b, lse_b these are).
void merge(torch::Tensor& out, torch::Tensor& lse, const torch::Tensor& out_b, const torch::Tensor& lse_b) {
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  const auto top = torch::maximum(lse, lse_b);
  const auto shift = top.masked_fill(top == kNegInf, 0);
  const auto a = (lse - shift).exp_(), b = (lse_b - shift).exp_();
  const auto sum = a + b;  // >= 1 where either side saw a key: its larger term is exp(0)
  out.mul_(a.unsqueeze(-1)).add_(out_b * b.unsqueeze(-1)).div_(sum.clamp_min(1).unsqueeze(-1));
  lse = shift + sum.log();
}

struct RingAttention : torch::autograd::Function<RingAttention> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, c10::intrusive_ptr<RingPlan> plan) {
    const int64_t batch = q.size(0), heads = q.size(1), kv_heads = k.size(1), seq = q.size(2), dim = q.size(3);
    const int64_t groups = heads / kv_heads;
    const auto stats_type = at::promote_types(q.scalar_type(), torch::kFloat32);
    const auto qs = model::scaled_queries(q, kv_heads, stats_type);
    const auto options = q.options().dtype(stats_type);
    auto out = torch::zeros({batch, kv_heads, groups, seq, dim}, options);
    auto lse = torch::full({batch, kv_heads, groups, seq}, -std::numeric_limits<double>::infinity(), options);
    auto block = torch::stack({k, v}).contiguous();  // [2, B, KV, T, D]: one transfer per step
    for (int64_t s = 0; s < plan->ranks(); ++s) {
      const bool last = s + 1 == plan->ranks();
      Passing next;
      if (!last) next = pass_on(*plan, block, kBlockTag);
      const auto started = Clock::now();
      const auto tiles = plan->tiles(plan->owner(s), q.device());
      if (tiles.any_visible()) {
        auto out_b = torch::empty_like(out), lse_b = torch::empty_like(lse);
        model::attend_tiles(tiles, qs, block[0], block[1], out_b, lse_b);
        merge(out, lse, out_b, lse_b);
      }
      if (plan->times) plan->times->attention_ns += nanoseconds_since(started);
      if (!last) block = arrived(*plan, next);
    }
    auto output = out.view({batch, heads, seq, dim}).to(q.scalar_type());
    ctx->save_for_backward({q, k, v, output, lse});
    ctx->saved_data["plan"] = c10::IValue::make_capsule(plan);
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2], &output = saved[3], &lse = saved[4];
    const auto plan = c10::static_intrusive_pointer_cast<RingPlan>(ctx->saved_data["plan"].toCapsule());
    auto inputs = model::tile_backward(q, k.size(1), output, grad_outputs[0], lse.scalar_type());

    auto block = torch::stack({k, v}).contiguous();
    Passing gradient;  // the accumulator of the block held one step earlier, on its way here
    for (int64_t s = 0; s < plan->ranks(); ++s) {
      const bool last = s + 1 == plan->ranks();
      Passing next;
      if (!last) next = pass_on(*plan, block, kBlockTag);
      const auto started = Clock::now();
      auto block_grad = torch::zeros(block.sizes(), lse.options());  // [2, B, KV, T, D]: dk, dv
      const auto tiles = plan->tiles(plan->owner(s), q.device());
      if (tiles.any_visible()) {
        auto dk = block_grad[0], dv = block_grad[1];
        model::attend_tiles_backward(tiles, inputs.qs, inputs.dout, lse, inputs.delta, block[0], block[1], inputs.dq, dk,
                                     dv);
      }
      if (plan->times) plan->times->attention_ns += nanoseconds_since(started);
      // The block's accumulator left its owner at step 0 and has gathered every rank's share
      // since; it goes on to the rank that holds the block next, and after the last step home.
      if (s > 0) block_grad.add_(arrived(*plan, gradient));
      gradient = pass_on(*plan, block_grad, kGradientTag);
      if (!last) block = arrived(*plan, next);
    }
    const auto own = arrived(*plan, gradient);
    return {inputs.query_gradient(q), own[0].to(k.scalar_type()), own[1].to(v.scalar_type()), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor ring_attention(const std::shared_ptr<Comm>& comm, const torch::Tensor& q, const torch::Tensor& k,
                             const torch::Tensor& v, const model::SequenceLayout& layout, int64_t block_size,
                             std::shared_ptr<RingTimes> times) {
  const auto& shard = layout.context;
  TORCH_CHECK(shard && shard->ranks() == comm->size() && shard->rank == comm->rank(),
              "ring attention needs the row's split over the ", comm->size(), " ranks of group '", comm->name(), "'");
  TORCH_CHECK(q.size(2) == shard->local_length() && k.sizes() == v.sizes() && q.size(1) % k.size(1) == 0,
              "ring attention: q ", q.sizes(), ", k ", k.sizes(), " and v ", v.sizes(), " do not fit ",
              shard->local_length(), " local tokens");
  auto plan = c10::make_intrusive<RingPlan>();
  plan->comm = comm;
  plan->shard = shard;
  if (layout.packed()) {
    model::document_ids(layout.cu_seqlens, shard->row_length);  // validates
    const auto bounds = layout.cu_seqlens.to(torch::kCPU).contiguous();
    plan->bounds.assign(bounds.data_ptr<int64_t>(), bounds.data_ptr<int64_t>() + bounds.numel());
  } else {
    plan->bounds = {0, shard->row_length};
  }
  plan->block_size = block_size;
  plan->times = std::move(times);
  return RingAttention::apply(q, k, v, plan);
}

}  // namespace xtrain::parallel
