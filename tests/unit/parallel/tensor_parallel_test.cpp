// Tensor parallelism over thread ranks: an MLP whose first weight is split by output rows
// (column-parallel) and whose second is split by input columns (row-parallel) computes what the
// whole MLP computes: output, input gradient and each rank's slice of the weight gradients,
// also with sequence parallelism (the input and output split along the sequence).
#include <catch2/catch.hpp>
#include <torch/torch.h>

#include "parallel/tensor_parallel.h"
#include "parallel/thread_comm.h"
#include "rank_threads.h"
#include "tensor_compare.h"

using namespace xtrain;

TEST_CASE("column- then row-parallel linear layers compute the whole MLP, with and without sequence parallelism",
          "[parallel][tp]") {
  const int64_t ranks = GENERATE(2, 4);
  const bool sequence_parallel = GENERATE(false, true);
  INFO("tp = " << ranks << ", sequence parallel = " << sequence_parallel);
  const int64_t batch = 2, sequence = 8, hidden = 12, width = 16;
  torch::manual_seed(5);
  const auto x = torch::randn({batch, sequence, hidden});
  const auto grad_out = torch::randn({batch, sequence, hidden});
  const auto w1 = torch::randn({width, hidden}) * 0.3, w2 = torch::randn({hidden, width}) * 0.3;

  // The whole MLP.
  const auto x_whole = x.clone().requires_grad_(true);
  const auto w1_whole = w1.clone().requires_grad_(true), w2_whole = w2.clone().requires_grad_(true);
  const auto y_whole = torch::nn::functional::linear(torch::gelu(torch::nn::functional::linear(x_whole, w1_whole)),
                                                     w2_whole);
  (y_whole * grad_out).sum().backward();

  parallel::ThreadWorld threads;
  std::vector<int64_t> all(ranks);
  for (int64_t r = 0; r < ranks; ++r) all[r] = r;
  std::vector<torch::Tensor> ys(ranks), dxs(ranks), dw1s(ranks), dw2s(ranks);
  const int64_t part = width / ranks, seq_part = sequence / ranks;
  const auto errors = testing::run_ranks(ranks, [&](int64_t r) {
    const auto group = threads.make_group(r, "tp", all);
    const auto mine = sequence_parallel ? x.narrow(1, r * seq_part, seq_part) : x;
    const auto input = mine.clone().requires_grad_(true);
    const auto w1_mine = w1.narrow(0, r * part, part).clone().requires_grad_(true);
    const auto w2_mine = w2.narrow(1, r * part, part).clone().requires_grad_(true);
    const int64_t dim = sequence_parallel ? 1 : -1;
    const auto h = torch::gelu(parallel::column_parallel_linear(group, input, w1_mine, false, dim));
    const auto y = parallel::row_parallel_linear(group, h, w2_mine, dim);
    const auto g = sequence_parallel ? grad_out.narrow(1, r * seq_part, seq_part) : grad_out;
    (y * g).sum().backward();
    ys[r] = y.detach();
    dxs[r] = input.grad();
    dw1s[r] = w1_mine.grad();
    dw2s[r] = w2_mine.grad();
  });
  REQUIRE(errors == std::vector<std::string>(ranks, ""));
  for (int64_t r = 0; r < ranks; ++r) {
    INFO("rank " << r);
    const auto want_y = sequence_parallel ? y_whole.detach().narrow(1, r * seq_part, seq_part) : y_whole.detach();
    const auto want_dx = sequence_parallel ? x_whole.grad().narrow(1, r * seq_part, seq_part) : x_whole.grad();
    CHECK(testing::max_relative_error(ys[r], want_y) < 1e-5);
    CHECK(testing::max_relative_error(dxs[r], want_dx) < 1e-5);
    CHECK(testing::max_relative_error(dw1s[r], w1_whole.grad().narrow(0, r * part, part)) < 1e-5);
    CHECK(testing::max_relative_error(dw2s[r], w2_whole.grad().narrow(1, r * part, part)) < 1e-5);
  }
}

TEST_CASE("gather and scatter along the last dimension are each other's backward", "[parallel][tp]") {
  const int64_t ranks = 2;
  parallel::ThreadWorld threads;
  const std::vector<int64_t> all{0, 1};
  torch::manual_seed(6);
  const auto whole = torch::randn({3, 8});
  std::vector<torch::Tensor> gathered(ranks), grads(ranks);
  const auto errors = testing::run_ranks(ranks, [&](int64_t r) {
    const auto group = threads.make_group(r, "tp", all);
    const auto x = whole.clone().requires_grad_(true);
    const auto mine = parallel::scatter_to_tensor_parallel(group, x);  // [3, 4]
    gathered[r] = parallel::gather_from_tensor_parallel(group, mine * (r + 1.0));
    gathered[r].sum().backward();
    grads[r] = x.grad();
  });
  REQUIRE(errors == std::vector<std::string>(ranks, ""));
  const auto expected = torch::cat({whole.narrow(1, 0, 4), whole.narrow(1, 4, 4) * 2.0}, 1);
  for (int64_t r = 0; r < ranks; ++r) {
    CHECK(torch::allclose(gathered[r], expected));
    // Each rank's loss sums the gathered whole; its input gradient is its own slice's factor,
    // gathered: [1 ... 1 | 2 ... 2].
    CHECK(torch::allclose(grads[r], torch::cat({torch::ones({3, 4}), torch::full({3, 4}, 2.0)}, 1)));
  }
}
