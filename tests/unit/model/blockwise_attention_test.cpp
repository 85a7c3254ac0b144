// blockwise_causal_attention against the naive causal_attention: values and gradients, the
// document mask of packed sequences, and input validation. Attention variants
// (model::AttentionVariant: scale, sliding window, sinks, a value head dim of its own) in every
// single-device kernel: the eager reference against a formula written out here mask by mask,
// the blockwise and sdpa kernels against the eager reference in value and in the gradients of
// q, k, v and the sinks, fp64 finite differences, and the window's tile skipping.
#include <torch/torch.h>

#include <catch2/catch.hpp>

#include "model/attention/attention.h"
#include "model/attention/blockwise_attention.h"
#include "model/gradcheck.h"
#include "model/attention/sdpa_attention.h"
#include "model/attention/span_attention.h"
#include "tensor_compare.h"

using namespace xtrain;

namespace {

struct Shape {
  int64_t batch, heads, kv_heads, seq, dim;
};

torch::Tensor cumulative(std::vector<int64_t> bounds) { return torch::tensor(bounds, torch::kInt64); }

// Heads in the [B, T, heads, D] layout that the attention module produces, seen as
// [B, heads, T, D]: the kernels must not assume contiguous inputs.
torch::Tensor random_heads(int64_t batch, int64_t heads, int64_t seq, int64_t dim,
                           torch::Dtype dtype = torch::kFloat32) {
  return torch::randn({batch, seq, heads, dim}, dtype).transpose(1, 2).requires_grad_(true);
}

// max |a - b| / max |b|: a relative error that stays meaningful where b crosses zero.
// Output and q, k, v gradients of sum(attention(q, k, v) * projection).
std::vector<torch::Tensor> value_and_grads(const torch::Tensor& out, const torch::Tensor& projection,
                                           const std::vector<torch::Tensor>& inputs) {
  auto grads = torch::autograd::grad({(out * projection).sum()}, inputs);
  grads.insert(grads.begin(), out.detach());
  return grads;
}

void check_matches_naive(const Shape& s, const torch::Tensor& cu_seqlens, int64_t block_size) {
  auto q = random_heads(s.batch, s.heads, s.seq, s.dim);
  auto k = random_heads(s.batch, s.kv_heads, s.seq, s.dim);
  auto v = random_heads(s.batch, s.kv_heads, s.seq, s.dim);
  auto projection = torch::randn({s.batch, s.heads, s.seq, s.dim});
  auto blockwise = value_and_grads(model::blockwise_causal_attention(q, k, v, cu_seqlens, block_size),
                                   projection, {q, k, v});
  auto naive = value_and_grads(model::causal_attention(q, k, v, cu_seqlens), projection, {q, k, v});
  const char* names[] = {"output", "dq", "dk", "dv"};
  for (int n = 0; n < 4; ++n) {
    INFO(names[n]);
    CHECK(xtrain::testing::max_relative_error(blockwise[n], naive[n]) < 1e-5);
  }
}

}  // namespace

TEST_CASE("blockwise attention matches the naive path in value and gradients", "[attention]") {
  torch::manual_seed(0);
  const auto kv_heads = GENERATE(2, 4);  // GQA and MHA
  INFO("kv_heads " << kv_heads);
  const Shape shape{2, 4, kv_heads, 77, 8};  // 77 is not a multiple of the block

  SECTION("one document, blocks of 16") { check_matches_naive(shape, {}, 16); }
  SECTION("one document given as cu_seqlens") { check_matches_naive(shape, cumulative({0, 77}), 16); }
  SECTION("one block larger than the sequence") { check_matches_naive(shape, {}, 256); }
  SECTION("blocks of 1") { check_matches_naive({1, 4, kv_heads, 9, 8}, cumulative({0, 4, 9}), 1); }
  SECTION("several documents, one of length 1") {
    check_matches_naive(shape, cumulative({0, 20, 21, 50, 77}), 16);
  }
  SECTION("documents of length 1 at both ends") { check_matches_naive(shape, cumulative({0, 1, 76, 77}), 16); }
  SECTION("documents aligned with blocks") { check_matches_naive(shape, cumulative({0, 16, 48, 77}), 16); }
  SECTION("an empty document") { check_matches_naive(shape, cumulative({0, 10, 10, 77}), 16); }
  SECTION("documents shorter than a block") {
    check_matches_naive(shape, cumulative({0, 3, 7, 12, 30, 31, 45, 77}), 32);
  }
}

TEST_CASE("blockwise attention in bf16 stays close to the fp32 result", "[attention]") {
  torch::manual_seed(1);
  auto q = random_heads(2, 4, 50, 16), k = random_heads(2, 2, 50, 16), v = random_heads(2, 2, 50, 16);
  auto cu = cumulative({0, 17, 50});
  auto reference = model::causal_attention(q, k, v, cu);
  auto bf16 = [](const torch::Tensor& t) { return t.detach().to(torch::kBFloat16).requires_grad_(true); };
  auto qb = bf16(q), kb = bf16(k), vb = bf16(v);
  auto out = model::blockwise_causal_attention(qb, kb, vb, cu, 16);
  CHECK(out.scalar_type() == torch::kBFloat16);
  CHECK(xtrain::testing::max_relative_error(out.to(torch::kFloat32), reference.detach()) < 2e-2);
  // The gradients, too, stay close: the tile matmuls run in bf16, the softmax in fp32.
  auto projection = torch::randn_like(reference);
  (reference * projection).sum().backward();
  (out.to(torch::kFloat32) * projection).sum().backward();
  CHECK(qb.grad().scalar_type() == torch::kBFloat16);
  CHECK(kb.grad().scalar_type() == torch::kBFloat16);
  CHECK(xtrain::testing::max_relative_error(qb.grad().to(torch::kFloat32), q.grad()) < 3e-2);
  CHECK(xtrain::testing::max_relative_error(kb.grad().to(torch::kFloat32), k.grad()) < 3e-2);
  CHECK(xtrain::testing::max_relative_error(vb.grad().to(torch::kFloat32), v.grad()) < 3e-2);
}

TEST_CASE("fp64 finite differences: blockwise attention", "[attention][gradcheck]") {
  torch::manual_seed(2);
  const bool packed = GENERATE(false, true);
  auto cu_seqlens = packed ? cumulative({0, 3, 4, 7}) : torch::Tensor();
  auto error = testing::max_gradcheck_error(
      [&](const std::vector<torch::Tensor>& in) {
        return model::blockwise_causal_attention(in[0], in[1], in[2], cu_seqlens, /*block_size=*/3);
      },
      {torch::randn({2, 4, 7, 3}), torch::randn({2, 2, 7, 3}), torch::randn({2, 2, 7, 3})});
  CHECK(error < 1e-6);
}

TEST_CASE("no attention crosses a document boundary", "[attention]") {
  torch::manual_seed(3);
  auto cu = cumulative({0, 13, 29, 40});
  auto q = torch::randn({2, 4, 40, 8}), k = torch::randn({2, 2, 40, 8}), v = torch::randn({2, 2, 40, 8});
  auto perturb = [](torch::Tensor t) {
    t = t.clone();
    t.narrow(2, 13, 16).normal_();
    return t;
  };
  torch::NoGradGuard no_grad;
  auto before = model::blockwise_causal_attention(q, k, v, cu, 8);
  auto after = model::blockwise_causal_attention(perturb(q), perturb(k), perturb(v), cu, 8);
  CHECK(torch::equal(before.narrow(2, 0, 13), after.narrow(2, 0, 13)));
  CHECK(torch::equal(before.narrow(2, 29, 11), after.narrow(2, 29, 11)));
  CHECK_FALSE(torch::equal(before.narrow(2, 13, 16), after.narrow(2, 13, 16)));
}

TEST_CASE("blockwise attention rejects malformed cu_seqlens", "[attention]") {
  auto q = torch::randn({1, 2, 10, 4}), k = torch::randn({1, 1, 10, 4});
  auto attend = [&](const torch::Tensor& cu) { return model::blockwise_causal_attention(q, k, k, cu, 4); };
  CHECK_THROWS_WITH(attend(cumulative({1, 10})), Catch::Contains("cu_seqlens must start at 0, got 1"));
  CHECK_THROWS_WITH(attend(cumulative({0, 5, 9})),
                    Catch::Contains("cu_seqlens must end at the sequence length 10, got 9"));
  CHECK_THROWS_WITH(attend(cumulative({0, 6, 5, 10})), Catch::Contains("cu_seqlens must be non-decreasing"));
  CHECK_THROWS_WITH(attend(cumulative({0})), Catch::Contains("at least [0, seq_len]"));
  CHECK_THROWS_WITH(attend(torch::tensor({0, 10}, torch::kInt32)), Catch::Contains("1-D int64"));
  CHECK_THROWS_WITH(model::causal_attention(q, k, k, cumulative({0, 11})),
                    Catch::Contains("cu_seqlens must end at the sequence length 10"));
}

namespace {

struct VariantCase {
  const char* name;
  int64_t window = 0;
  double scale = 0;
  bool sinks = false;
  int64_t value_dim = 8;  // q and k: 8
  std::vector<int64_t> bounds;  // empty: one sequence
};

std::ostream& operator<<(std::ostream& out, const VariantCase& c) {
  return out << c.name << " (window " << c.window << ", scale " << c.scale << ", sinks " << c.sinks << ", Dv "
             << c.value_dim << ", " << c.bounds.size() << " bounds)";
}

torch::Tensor variant_cu_seqlens(const VariantCase& c) {
  return c.bounds.empty() ? torch::Tensor() : torch::tensor(c.bounds, torch::kInt64);
}

// Attention written out from its definition, one mask term per rule, with the sink as an extra
// term of each row's denominator: exp(s_ij - m) / (sum_j' exp(s_ij' - m) + exp(sink - m)).
torch::Tensor attention_by_definition(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                      const std::vector<int64_t>& bounds, const model::AttentionVariant& variant) {
  const int64_t seq = q.size(2), groups = q.size(1) / k.size(1);
  std::vector<int64_t> doc(static_cast<size_t>(seq), 0);
  for (size_t d = 0; d + 1 < bounds.size(); ++d)
    for (int64_t p = bounds[d]; p < bounds[d + 1]; ++p) doc[static_cast<size_t>(p)] = static_cast<int64_t>(d);
  auto visible = torch::zeros({seq, seq}, torch::kBool);
  for (int64_t i = 0; i < seq; ++i)
    for (int64_t j = 0; j < seq; ++j)
      visible[i][j] = j <= i && doc[static_cast<size_t>(i)] == doc[static_cast<size_t>(j)] &&
                      (variant.window == 0 || i - j < variant.window);
  const double scale = variant.scale != 0 ? variant.scale : 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  auto scores = torch::matmul(q, k.repeat_interleave(groups, 1).transpose(-2, -1)) * scale;
  auto top = scores.masked_fill(visible.logical_not(), -1e300).amax(-1, true);
  if (variant.sinks.defined()) top = torch::maximum(top, variant.sinks.view({1, -1, 1, 1}));
  auto terms = (scores - top).exp().masked_fill(visible.logical_not(), 0);
  auto denominator = terms.sum(-1, true);
  if (variant.sinks.defined()) denominator = denominator + (variant.sinks.view({1, -1, 1, 1}) - top).exp();
  return torch::matmul(terms / denominator, v.repeat_interleave(groups, 1));
}

// q [B, 4, T, 8], k [B, 2, T, 8], v [B, 2, T, Dv] (GQA) and sinks [4] (requiring gradients), and a
// projection of the output for the gradients.
struct VariantInputs {
  torch::Tensor q, k, v, sinks, projection;
  model::AttentionVariant variant(const VariantCase& c) const {
    return {c.scale, c.window, c.sinks ? sinks : torch::Tensor()};
  }
  std::vector<torch::Tensor> leaves(const VariantCase& c) const {
    return c.sinks ? std::vector<torch::Tensor>{q, k, v, sinks} : std::vector<torch::Tensor>{q, k, v};
  }
};

VariantInputs variant_inputs(const VariantCase& c, int64_t seq, torch::Dtype dtype = torch::kFloat32) {
  constexpr int64_t kBatch = 2, kHeads = 4, kKvHeads = 2, kDim = 8;
  // [B, T, heads, D] seen as [B, heads, T, D], as the attention module hands them over.
  auto heads = [&](int64_t count, int64_t dim) {
    return torch::randn({kBatch, seq, count, dim}, dtype).transpose(1, 2).requires_grad_(true);
  };
  VariantInputs in;
  in.q = heads(kHeads, kDim);
  in.k = heads(kKvHeads, kDim);
  in.v = heads(kKvHeads, c.value_dim);
  in.sinks = torch::randn({kHeads}, dtype).requires_grad_(true);
  in.projection = torch::randn({kBatch, kHeads, seq, c.value_dim}, dtype);
  return in;
}

// The output and the gradients of sum(out * projection) by every leaf.
std::vector<torch::Tensor> variant_value_and_grads(const torch::Tensor& out, const VariantInputs& in,
                                                   const VariantCase& c) {
  auto grads = torch::autograd::grad({(out * in.projection).sum()}, in.leaves(c));
  grads.insert(grads.begin(), out.detach());
  return grads;
}

// The worst relative error of a kernel's output and gradients against the eager reference.
double worst_against_eager(
    const VariantCase& c, int64_t seq,
    const std::function<torch::Tensor(const VariantInputs&, const model::AttentionVariant&)>& kernel) {
  torch::manual_seed(11);
  const auto in = variant_inputs(c, seq);
  const auto variant = in.variant(c);
  const auto actual = variant_value_and_grads(kernel(in, variant), in, c);
  const auto expected =
      variant_value_and_grads(model::causal_attention(in.q, in.k, in.v, variant_cu_seqlens(c), variant), in, c);
  const char* names[] = {"output", "dq", "dk", "dv", "dsinks"};
  double worst = 0;
  for (size_t n = 0; n < actual.size(); ++n) {
    const double error = testing::max_relative_error(actual[n], expected[n]);
    INFO(names[n] << " " << error);
    CHECK(error < 1e-5);
    worst = std::max(worst, error);
  }
  return worst;
}

const std::vector<int64_t> kVariantDocuments{0, 30, 30, 77};  // an empty one; both longer than the windows

VariantCase variant_case(const char* name, int64_t window = 0, double scale = 0, bool sinks = false,
                         int64_t value_dim = 8, std::vector<int64_t> bounds = {}) {
  return {name, window, scale, sinks, value_dim, std::move(bounds)};
}

std::vector<VariantCase> variant_cases() {
  std::vector<VariantCase> cases = {
      variant_case("plain"),
      variant_case("scale", 0, 0.23),
      variant_case("value dim", 0, 0, false, 12),
      variant_case("sinks", 0, 0, true),
      variant_case("window below a block", 5),
      variant_case("window above a block", 21),
      variant_case("window beyond the row", 100),
      variant_case("packed window", 5, 0, false, 8, kVariantDocuments),
      variant_case("packed window above a block", 21, 0, false, 8, kVariantDocuments),
      variant_case("packed sinks", 0, 0, true, 8, kVariantDocuments),
  };
  for (int64_t window : {5, 21, 100})
    for (const auto& bounds : {std::vector<int64_t>{}, kVariantDocuments})
      cases.push_back(variant_case("everything", window, 0.31, true, 6, bounds));
  return cases;
}

}  // namespace

TEST_CASE("the eager reference with a variant equals attention written out from its definition",
          "[attention][variant]") {
  torch::manual_seed(5);
  for (auto c : variant_cases()) {
    for (int64_t seq : {77, 300}) {  // 300: packed rows above 256 tokens take the segmented path
      if (seq == 300 && !c.bounds.empty()) c.bounds = {0, 120, 120, 200, 300};
      CAPTURE(c, seq);
      const auto in = variant_inputs(c, seq, torch::kFloat64);
      const auto variant = in.variant(c);
      const auto bounds = c.bounds.empty() ? std::vector<int64_t>{0, seq} : c.bounds;
      const auto eager = model::causal_attention(in.q, in.k, in.v, variant_cu_seqlens(c), variant);
      const auto defined = attention_by_definition(in.q, in.k, in.v, bounds, variant);
      CHECK(testing::max_relative_error(eager, defined) < 1e-12);
    }
  }
}

TEST_CASE("the sink takes probability from the keys: a very negative sink changes nothing", "[attention][variant]") {
  torch::manual_seed(6);
  const auto q = torch::randn({1, 2, 9, 4}), k = torch::randn({1, 2, 9, 4}), v = torch::randn({1, 2, 9, 4});
  const auto plain = model::causal_attention(q, k, v);
  const auto lost = model::causal_attention(q, k, v, {}, {0, 0, torch::full({2}, -1e4)});
  CHECK(testing::max_relative_error(lost, plain) < 1e-6);
  const auto strong = model::causal_attention(q, k, v, {}, {0, 0, torch::full({2}, 1e4)});
  CHECK(strong.abs().max().item<double>() < 1e-6);  // the sink takes all: the output is the sink's value, 0
}

TEST_CASE("blockwise attention with each variant matches the eager reference in value and gradients",
          "[attention][blockwise][variant]") {
  double worst = 0;
  for (const auto& c : variant_cases()) {
    CAPTURE(c);
    worst = std::max(worst, worst_against_eager(c, 77, [&](const VariantInputs& in, const model::AttentionVariant& v) {
      return model::blockwise_causal_attention(in.q, in.k, in.v, variant_cu_seqlens(c), 16, v);
    }));
  }
  WARN("blockwise variants: worst relative error " << worst);
}

TEST_CASE("the sdpa kernel with each variant matches the eager reference in value and gradients",
          "[attention][sdpa][variant]") {
  double worst = 0;
  for (const auto& c : variant_cases()) {
    CAPTURE(c);
    worst = std::max(worst, worst_against_eager(c, 77, [&](const VariantInputs& in, const model::AttentionVariant& v) {
      return model::sdpa_causal_attention(in.q, in.k, in.v, variant_cu_seqlens(c), 16, v);
    }));
  }
  WARN("sdpa variants: worst relative error " << worst);
}

TEST_CASE("fp64 finite differences: attention with window, sinks, scale and its own value dim",
          "[model][gradcheck][variant]") {
  torch::manual_seed(8);
  const auto cu_seqlens = torch::tensor(std::vector<int64_t>{0, 3, 9}, torch::kInt64);
  const std::vector<torch::Tensor> inputs{torch::randn({1, 4, 9, 4}), torch::randn({1, 2, 9, 4}),
                                          torch::randn({1, 2, 9, 3}), torch::randn({4})};
  auto variant_of = [](const torch::Tensor& sinks) { return model::AttentionVariant{0.4, 3, sinks}; };
  const auto eager = testing::max_gradcheck_error(
      [&](const std::vector<torch::Tensor>& in) {
        return model::causal_attention(in[0], in[1], in[2], cu_seqlens, variant_of(in[3]));
      },
      inputs);
  const auto blockwise = testing::max_gradcheck_error(
      [&](const std::vector<torch::Tensor>& in) {
        return model::blockwise_causal_attention(in[0], in[1], in[2], cu_seqlens, 2, variant_of(in[3]));
      },
      inputs);
  WARN("gradcheck: eager " << eager << ", blockwise " << blockwise);
  CHECK(eager < 1e-6);
  CHECK(blockwise < 1e-6);
}

TEST_CASE("a window skips the tiles before it: the tiles visited grow with T/b * (w/b + 2)",
          "[attention][blockwise][variant]") {
  constexpr int64_t kSeq = 512, kBlock = 16, kTiles = kSeq / kBlock;
  const auto q = torch::randn({1, 2, kSeq, 4}), k = torch::randn({1, 1, kSeq, 4}), v = torch::randn({1, 1, kSeq, 4});
  auto visited = [&](int64_t window) {
    const model::SpanTiles tiles({{0, kSeq}}, {{0, kSeq}}, {0, kSeq}, kBlock, q.device(), window);
    const auto qs = model::scaled_queries(q, 1, torch::kFloat32, 0.5);
    auto out = torch::empty({1, 1, 2, kSeq, 4}), lse = torch::empty({1, 1, 2, kSeq});
    model::attend_tiles(tiles, qs, k, v, out, lse);
    const int64_t forward = tiles.visited();
    auto dq = torch::zeros_like(qs), dk = torch::zeros_like(k), dv = torch::zeros_like(v);
    model::attend_tiles_backward(tiles, qs, torch::randn_like(out), lse, torch::randn_like(lse), k, v, dq, dk, dv);
    CHECK(tiles.visited() == 2 * forward);  // backward visits the same tiles
    return forward;
  };
  for (int64_t window : {1, 8, 16, 40, 100}) {
    CAPTURE(window);
    CHECK(visited(window) <= kTiles * (window / kBlock + 2));
  }
  CHECK(visited(0) == kTiles * (kTiles + 1) / 2);  // no window: every tile on or below the diagonal
  CHECK(visited(kSeq) == visited(0));
}
