// blockwise_causal_attention against the naive causal_attention: values and gradients, the
// document mask of packed sequences, and input validation.
#include <torch/torch.h>

#include <catch2/catch.hpp>

#include "model/attention.h"
#include "model/blockwise_attention.h"
#include "model/gradcheck.h"
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
