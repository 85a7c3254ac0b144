// FSDP over in-process ranks: FSDP 2 and 4, HSDP 2x2 and DDP 2 (threads over a ThreadWorld), each
// training on its slice of the batch, hold in their shards exactly the gradients one process
// computes on the whole batch, for every parameter, tied or untied. This is the multi-rank FSDP
// path (gathers prefetched, reductions started from backward) without processes or sockets.
#include <cmath>
#include <map>

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include "parallel/fully_sharded.h"
#include "parallel/thread_comm.h"
#include "model/causal_lm.h"
#include "model/model_builder.h"
#include "model/spec/model_spec.h"
#include "model/layers/parameter_init.h"
#include "model/small_llama.h"
#include "rank_threads.h"
#include "thread_mesh.h"
#include "tensor_compare.h"

using namespace xtrain;

namespace {

parallel::DeviceMesh thread_mesh(parallel::ThreadWorld& threads, int64_t rank, int64_t dp, int64_t fsdp) {
  parallel::ParallelDegrees degrees;
  degrees.dp = dp;
  degrees.fsdp = fsdp;
  return testing::thread_mesh(threads, rank, degrees);
}

}  // namespace

TEST_CASE("FSDP 2 and 4, HSDP 2x2 and DDP 2 over thread ranks hold the gradients of one process", "[parallel][fsdp]") {
  const auto [dp, fsdp_degree] = GENERATE(std::pair<int64_t, int64_t>{1, 2}, std::pair<int64_t, int64_t>{1, 4},
                                          std::pair<int64_t, int64_t>{2, 2}, std::pair<int64_t, int64_t>{2, 1});
  const int64_t ranks = dp * fsdp_degree;
  const bool tied = GENERATE(false, true);
  // Unmaterialised models whose ranks draw only their shards, or whole models sliced.
  const bool from_source = GENERATE(false, true);
  INFO("dp = " << dp << ", fsdp = " << fsdp_degree << ", tie_embeddings = " << tied << ", from_source = " << from_source);
  // Hidden 30 (3 heads of 10): no unit's size divides by 4, so shards over 4 ranks carry padding.
  const testing::SmallLlama shape{53, 30, 2, 3, 1, 70, 16, tied};
  torch::manual_seed(5);
  const auto tokens = torch::randint(0, 53, {4, 12}, torch::kInt64);

  torch::manual_seed(3);
  auto reference = shape.build(3);
  model::next_token_loss(*reference, tokens).backward();
  std::map<std::string, torch::Tensor> expected, weights;
  double expected_norm_squared = 0;
  for (const auto& item : reference->named_parameters()) {
    expected_norm_squared += item.value().grad().to(torch::kFloat64).square().sum().item<double>();
    expected[item.key()] = item.value().grad().reshape(-1);
    weights[item.key()] = item.value().detach().reshape(-1);
  }

  std::vector<std::shared_ptr<model::CausalLM>> models;
  for (int64_t r = 0; r < ranks; ++r)
    models.push_back(from_source ? model::declare_model(shape.config()) : shape.build(3));
  parallel::ThreadWorld threads;
  std::vector<std::unique_ptr<parallel::FullyShardedModel>> sharded(static_cast<size_t>(ranks));
  std::vector<double> norms(static_cast<size_t>(ranks));
  const int64_t per_rank = tokens.size(0) / ranks;
  auto errors = testing::run_ranks(ranks, [&](int64_t r) {
    auto& model = models[static_cast<size_t>(r)];
    auto& fsdp = sharded[static_cast<size_t>(r)];
    const auto source = from_source ? model::init_source(model->init_plan(), 3) : model::ParameterSource();
    fsdp = std::make_unique<parallel::FullyShardedModel>(model, thread_mesh(threads, r, dp, fsdp_degree),
                                                     /*reshard_after_forward=*/true, source);
    fsdp->zero_grad();
    fsdp->begin_micro_batch(/*last=*/true);
    // Each rank's mean loss weighs 1/ranks: the reduced gradients are the sum over ranks.
    (model::next_token_loss(*model, tokens.narrow(0, r * per_rank, per_rank)) / static_cast<double>(ranks))
        .backward();
    fsdp->end_micro_batch();
    norms[static_cast<size_t>(r)] = fsdp->clip_grad_norm(0.0);  // 0: measure only
  });
  CHECK(errors == std::vector<std::string>(static_cast<size_t>(ranks), ""));
  // The clipping norm counts every shard once, replicas (HSDP, DDP) included once.
  for (double norm : norms) CHECK(norm == Approx(std::sqrt(expected_norm_squared)).epsilon(1e-6));

  std::map<std::string, int64_t> covered;
  double worst = 0;
  for (auto& fsdp : sharded) {
    REQUIRE(fsdp);
    for (const auto* piece : fsdp->parameters()) {
      INFO(piece->name << " from element " << piece->begin);
      REQUIRE(expected.count(piece->name) == 1);
      covered[piece->name] += piece->local.numel();
      if (piece->local.numel() == 0) continue;
      // Every rank starts from the one process's weights, bit for bit.
      CHECK(torch::equal(piece->local.detach(), weights[piece->name].narrow(0, piece->begin, piece->local.numel())));
      const auto want = expected[piece->name].narrow(0, piece->begin, piece->local.numel());
      const double error = testing::max_relative_error(piece->local.grad(), want);
      CHECK(error < 1e-6);
      worst = std::max(worst, error);
    }
  }
  // The ranks' pieces cover every parameter exactly once per replica.
  REQUIRE(covered.size() == expected.size());
  for (const auto& [name, grad] : expected) CHECK(covered[name] == grad.numel() * dp);
  CHECK(worst < 1e-6);
}
