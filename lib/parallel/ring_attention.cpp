#include "parallel/ring_attention.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <vector>

#include <torch/torch.h>

#include "model/attention/attention.h"
#include "model/attention/flash_block_attention.h"
#include "model/attention/span_attention.h"

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
  bool flash = false;  // block pairs through the CUDA flash kernel (flash_pairs_apply)
  double scale = 0;    // the softmax scale, resolved
  int64_t window = 0;
  bool sinks = false;  // whether the sinks argument holds the sinks (autograd takes no undefined tensor)
  int64_t key_dim = 0;  // k's head dim: a block is k and v side by side in the last dim

  int64_t rank() const { return comm->rank(); }
  int64_t ranks() const { return comm->size(); }
  // The rank whose block this one holds at ring step s.
  int64_t owner(int64_t s) const { return (rank() - s + ranks()) % ranks(); }
  model::SpanTiles tiles(int64_t owner, const torch::Device& device) const {
    return {shard->spans[static_cast<size_t>(rank())], shard->spans[static_cast<size_t>(owner)], bounds, block_size,
            device, window};
  }
  // A block [.., D + Dv] (or its gradient) as its k and v parts.
  torch::Tensor keys(const torch::Tensor& block) const { return block.narrow(-1, 0, key_dim); }
  torch::Tensor values(const torch::Tensor& block) const {
    return block.narrow(-1, key_dim, block.size(-1) - key_dim);
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
  if (plan.times) {
    plan.times->blocked_ns += nanoseconds_since(started);
    ++plan.times->waits;
  }
  return passing.incoming;
}

// out, lse <- the softmax over the union of their keys and block's (whose out_b, lse_b these are),
// in place (they may be views of larger tensors).
void merge(const torch::Tensor& out, const torch::Tensor& lse, const torch::Tensor& out_b, const torch::Tensor& lse_b) {
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  const auto top = torch::maximum(lse, lse_b);
  const auto shift = top.masked_fill(top == kNegInf, 0);
  const auto a = (lse - shift).exp_(), b = (lse_b - shift).exp_();
  const auto sum = a + b;  // >= 1 where either side saw a key: its larger term is exp(0)
  out.mul_(a.unsqueeze(-1)).add_(out_b * b.unsqueeze(-1)).div_(sum.clamp_min(1).unsqueeze(-1));
  lse.copy_(shift + sum.log());
}

// How a span of queries sees a span of keys of the same row, without documents: not at all,
// wholly (an earlier span), causally (the same span), or otherwise (only the tiles know).
enum class SpanPair { none, whole, causal, other };
SpanPair span_pair(const model::TokenSpan& queries, const model::TokenSpan& keys) {
  if (keys.begin >= queries.end()) return SpanPair::none;
  if (keys.end() <= queries.begin) return SpanPair::whole;
  return keys == queries ? SpanPair::causal : SpanPair::other;
}

// Whether every block pair of the ring is one flash kernel call: one sequence per row (documents
// and windows need masks the kernel does not take) whose spans meet wholly, causally or not at all.
bool flash_pairs_apply(const torch::Tensor& q, const torch::Tensor& v, const model::SequenceLayout& layout,
                       int64_t window) {
  if (layout.packed() || window > 0 || !model::flash_blocks_take(q, v)) return false;
  for (const auto& mine : layout.context->spans)
    for (const auto& theirs : layout.context->spans)
      for (const auto& queries : mine)
        for (const auto& keys : theirs)
          if (span_pair(queries, keys) == SpanPair::other) return false;
  return true;
}

// Calls visit(pair, query span's local offset and length, key span's) for each pair of this
// rank's spans and `owner`'s that sees something.
template <typename Visit>
void for_each_pair(const RingPlan& plan, int64_t owner, const Visit& visit) {
  int64_t query_first = 0;
  for (const auto& queries : plan.shard->spans[static_cast<size_t>(plan.rank())]) {
    int64_t key_first = 0;
    for (const auto& keys : plan.shard->spans[static_cast<size_t>(owner)]) {
      const auto pair = span_pair(queries, keys);
      if (pair != SpanPair::none) visit(pair == SpanPair::causal, query_first, queries.length, key_first, keys.length);
      key_first += keys.length;
    }
    query_first += queries.length;
  }
}

// Forward of one ring step through the flash kernel: out [B, H, T, D] and lse [B, H, T] (stats
// dtype) merged with the step's block.
void attend_flash(const RingPlan& plan, int64_t owner, const torch::Tensor& q, const torch::Tensor& k,
                  const torch::Tensor& v, const torch::Tensor& out, const torch::Tensor& lse) {
  for_each_pair(plan, owner, [&](bool causal, int64_t q0, int64_t qn, int64_t k0, int64_t kn) {
    auto [out_b, lse_b] =
        model::flash_block(q.narrow(2, q0, qn), k.narrow(2, k0, kn), v.narrow(2, k0, kn), causal, plan.scale);
    merge(out.narrow(2, q0, qn), lse.narrow(2, q0, qn), out_b.to(out.scalar_type()), lse_b.to(lse.scalar_type()));
  });
}

// Backward of one ring step through the flash kernel: adds to dq [B, H, T, D] and the block's
// dk, dv [B, KV, T, D] (stats dtype), from the whole attention's output and lse.
void attend_flash_backward(const RingPlan& plan, int64_t owner, const torch::Tensor& dout, const torch::Tensor& q,
                           const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& output,
                           const torch::Tensor& lse, const torch::Tensor& dq, const torch::Tensor& dk,
                           const torch::Tensor& dv) {
  for_each_pair(plan, owner, [&](bool causal, int64_t q0, int64_t qn, int64_t k0, int64_t kn) {
    auto [dq_b, dk_b, dv_b] = model::flash_block_backward(dout.narrow(2, q0, qn), q.narrow(2, q0, qn),
                                                          k.narrow(2, k0, kn), v.narrow(2, k0, kn),
                                                          output.narrow(2, q0, qn), lse.narrow(2, q0, qn), causal,
                                                          plan.scale);
    dq.narrow(2, q0, qn).add_(dq_b);
    dk.narrow(2, k0, kn).add_(dk_b);
    dv.narrow(2, k0, kn).add_(dv_b);
  });
}

struct RingAttention : torch::autograd::Function<RingAttention> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& sinks, c10::intrusive_ptr<RingPlan> plan) {
    const int64_t batch = q.size(0), heads = q.size(1), kv_heads = k.size(1), seq = q.size(2), dim = v.size(3);
    const int64_t groups = heads / kv_heads;
    const auto stats_type = at::promote_types(q.scalar_type(), torch::kFloat32);
    const auto qs = plan->flash ? torch::Tensor() : model::scaled_queries(q, kv_heads, stats_type, plan->scale);
    const auto options = q.options().dtype(stats_type);
    auto out = torch::zeros({batch, kv_heads, groups, seq, dim}, options);
    auto lse = torch::full({batch, kv_heads, groups, seq}, -std::numeric_limits<double>::infinity(), options);
    auto block = torch::cat({k, v}, -1).contiguous();  // [B, KV, T, D + Dv]: one transfer per step
    for (int64_t s = 0; s < plan->ranks(); ++s) {
      const bool last = s + 1 == plan->ranks();
      Passing next;
      if (!last) next = pass_on(*plan, block, kBlockTag);
      const auto started = Clock::now();
      if (plan->flash) {
        attend_flash(*plan, plan->owner(s), q, plan->keys(block), plan->values(block),
                     out.view({batch, heads, seq, dim}), lse.view({batch, heads, seq}));
      } else if (const auto tiles = plan->tiles(plan->owner(s), q.device()); tiles.any_visible()) {
        auto out_b = torch::empty_like(out), lse_b = torch::empty_like(lse);
        model::attend_tiles(tiles, qs, plan->keys(block), plan->values(block), out_b, lse_b);
        merge(out, lse, out_b, lse_b);
      }
      if (plan->times) plan->times->attention_ns += nanoseconds_since(started);
      if (!last) block = arrived(*plan, next);
    }
    // The sinks join each row once, now that its lse covers every key of the row.
    if (plan->sinks) model::add_sinks(out.view({batch, heads, seq, dim}), lse.view({batch, heads, seq}), sinks);
    auto output = out.view({batch, heads, seq, dim}).to(q.scalar_type());
    ctx->save_for_backward({q, k, v, output, lse, sinks});
    ctx->saved_data["plan"] = c10::IValue::make_capsule(plan);
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2], &output = saved[3], &lse = saved[4], &sinks = saved[5];
    const auto plan = c10::static_intrusive_pointer_cast<RingPlan>(ctx->saved_data["plan"].toCapsule());
    const int64_t batch = q.size(0), heads = q.size(1), seq = q.size(2);
    // The flash kernel takes q, dout and the output as they are; the tiles their grouped forms.
    const auto stats_type = lse.scalar_type();
    auto inputs = plan->flash ? model::TileBackward{{}, {}, {}, torch::zeros(q.sizes(), lse.options()), plan->scale}
                              : model::tile_backward(q, k.size(1), output, grad_outputs[0], stats_type, plan->scale);
    const auto dout = grad_outputs[0].to(q.scalar_type());
    if (plan->flash && plan->sinks) inputs.delta = (dout.to(stats_type) * output.to(stats_type)).sum(-1);

    auto block = torch::cat({k, v}, -1).contiguous();
    Passing gradient;  // the accumulator of the block held one step earlier, on its way here
    for (int64_t s = 0; s < plan->ranks(); ++s) {
      const bool last = s + 1 == plan->ranks();
      Passing next;
      if (!last) next = pass_on(*plan, block, kBlockTag);
      const auto started = Clock::now();
      auto block_grad = torch::zeros(block.sizes(), lse.options());  // [B, KV, T, D + Dv]: dk, dv
      auto dk = plan->keys(block_grad), dv = plan->values(block_grad);
      if (plan->flash) {
        attend_flash_backward(*plan, plan->owner(s), dout, q, plan->keys(block), plan->values(block), output,
                              lse.view({batch, heads, seq}), inputs.dq, dk, dv);
      } else if (const auto tiles = plan->tiles(plan->owner(s), q.device()); tiles.any_visible()) {
        auto dq = inputs.dq;
        model::attend_tiles_backward(tiles, inputs.qs, inputs.dout, lse, inputs.delta, plan->keys(block),
                                     plan->values(block), dq, dk, dv);
      }
      if (plan->times) plan->times->attention_ns += nanoseconds_since(started);
      // The block's accumulator left its owner at step 0 and has gathered every rank's share
      // since; it goes on to the rank that holds the block next, and after the last step home.
      if (s > 0) block_grad.add_(arrived(*plan, gradient));
      gradient = pass_on(*plan, block_grad, kGradientTag);
      if (!last) block = arrived(*plan, next);
    }
    const auto own = arrived(*plan, gradient);
    auto dq = plan->flash ? inputs.dq.to(q.scalar_type()) : inputs.query_gradient(q);
    // This rank's rows' share: the context ranks' gradients are summed like every parameter's.
    auto dsinks = plan->sinks ? model::sink_gradient(sinks, lse.view({batch, heads, seq}),
                                                     inputs.delta.reshape({batch, heads, seq}))
                              : torch::Tensor();
    return {dq, plan->keys(own).to(k.scalar_type()), plan->values(own).to(v.scalar_type()), dsinks, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor ring_attention(const std::shared_ptr<Comm>& comm, const torch::Tensor& q, const torch::Tensor& k,
                             const torch::Tensor& v, const model::SequenceLayout& layout,
                             const model::AttentionVariant& variant, int64_t block_size,
                             std::shared_ptr<RingTimes> times) {
  const auto& shard = layout.context;
  TORCH_CHECK(shard && shard->ranks() == comm->size() && shard->rank == comm->rank(),
              "ring attention needs the row's split over the ", comm->size(), " ranks of group '", comm->name(), "'");
  TORCH_CHECK(q.size(2) == shard->local_length() && k.sizes().slice(0, 3) == v.sizes().slice(0, 3) &&
                  q.size(3) == k.size(3) && q.size(1) % k.size(1) == 0,
              "ring attention: q ", q.sizes(), ", k ", k.sizes(), " and v ", v.sizes(), " do not fit ",
              shard->local_length(), " local tokens");
  variant.check(q.size(1));
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
  plan->flash = flash_pairs_apply(q, v, layout, variant.window);
  plan->scale = variant.softmax_scale(q.size(3));
  plan->window = variant.window;
  plan->sinks = variant.has_sinks();
  plan->key_dim = k.size(3);
  const auto sinks = variant.has_sinks() ? variant.sinks : torch::empty({0}, q.options().dtype(torch::kFloat32));
  return RingAttention::apply(q, k, v, sinks, plan);
}

}  // namespace xtrain::parallel
