// The training step and the run state on in-process ranks, as the trainer builds them:
// parallelize() over a thread mesh, the layout's schedule, AdamW over this rank's pieces.
//  - weighting: one step over FSDP 2 ranks and one over a single process (two micro batches)
//    both give the loss and gradients of one pass over the whole global batch, whose rows carry
//    different numbers of targets;
//  - skip: a step with a non-finite loss, and a loss spike, change no weight on any rank;
//  - rollback: back to a saved checkpoint, the weights are the checkpoint's and the next step
//    retraces the first run's exactly (AdamW's moments and step restored).
#include <cmath>
#include <limits>
#include <map>

#include <torch/torch.h>

#include "ckpt/checkpoint.h"
#include "model/model_builder.h"
#include "model/layers/parameter_init.h"
#include "model/layers/parameter_source.h"
#include "model/small_llama.h"
#include "parallel/parallelize.h"
#include "parallel/rank_threads.h"
#include "parallel/thread_mesh.h"
#include "scratch_dir.h"
#include "train/checkpoint_writer.h"
#include "train/run_state.h"
#include "train/training_loss.h"
#include "train/training_step.h"

// Catch after torch: c10 defines a CHECK macro of its own.
#include <catch2/catch.hpp>
#include "tensor_compare.h"

using namespace xtrain;

namespace {

const testing::SmallLlama kShape{53, 32, 2, 4, 2, 64, 12, false};
constexpr int64_t kSeed = 11;

// Four rows of 12 tokens; rows 2 and 3 have most of their targets masked, so the micro batches
// of a step carry 24, 24, 5 and 2 targets.
std::vector<data::MicroBatch> rows() {
  torch::manual_seed(4);
  const auto tokens = torch::randint(0, kShape.vocab, {4, 13}, torch::kInt64);
  std::vector<data::MicroBatch> batches;
  for (int64_t r = 0; r < 4; ++r) {
    auto targets = tokens.narrow(0, r, 1).narrow(1, 1, 12).clone();  // a copy: masking must not touch the inputs
    const int64_t masked = r == 2 ? 7 : r == 3 ? 10 : 0;
    targets.narrow(1, 0, masked).fill_(-100);
    data::MicroBatch batch;
    batch.inputs = tokens.narrow(0, r, 1).narrow(1, 0, 12).clone();
    batch.targets = targets;
    batch.target_count = 12 - masked;
    batches.push_back(std::move(batch));
  }
  return batches;
}

data::MicroBatch join(const std::vector<data::MicroBatch>& parts) {
  std::vector<torch::Tensor> inputs, targets;
  int64_t count = 0;
  for (const auto& p : parts) inputs.push_back(p.inputs), targets.push_back(p.targets), count += p.target_count;
  data::MicroBatch joined;
  joined.inputs = torch::cat(inputs);
  joined.targets = torch::cat(targets);
  joined.target_count = count;
  return joined;
}

// One rank's trainer parts, built as the trainer builds them.
struct Rank {
  Rank(parallel::DeviceMesh layout, train::StepSettings settings) : mesh(std::move(layout)) {
    auto model = model::declare_model(kShape.config());
    model::accumulate_lookup_grads_in_place(*model);
    experts = std::make_unique<train::ExpertBalance>(*model, 0.0);
    parallel = parallel::parallelize(model, mesh, {}, model::init_source(model->init_plan(), kSeed));
    trained = train::TrainedParameters::of(*parallel, [](const std::string&, size_t dims) { return dims > 1; });
    optimizer = std::make_unique<optim::AdamW>(trained.optimized, optim::AdamWOptions{0.9, 0.95, 1e-8, 0.1});
    schedule = train::make_schedule(*parallel, mesh, config::PpSchedule::one_f_one_b, 1, torch::kCPU);
    sums = std::make_unique<train::RankSums>(mesh.group(parallel::Dim::world), torch::kCPU);
    step = std::make_unique<train::TrainingStep>(*parallel, *schedule, *optimizer, nullptr, trained.optimized,
                                                 *experts, mesh, *sums, settings);
    train::RunIdentity identity{12, mesh.degrees(), false, nlohmann::json::object()};
    state = std::make_unique<train::RunState>(*parallel, trained, *optimizer, nullptr, *experts, mesh, *sums,
                                              torch::kCPU, identity);
  }

  train::StepOutcome run(int64_t step_number, const std::vector<data::MicroBatch>& batches, double loss_factor = 1.0) {
    parallel->zero_grad();
    train::StepInput input;
    input.step = step_number;
    input.lr = 1e-2;
    input.micro_batches = &batches;
    input.loss_factor = loss_factor;
    input.fault = &no_fault;
    state->step = step_number;
    state->samples_consumed += 4;
    return step->run(input);
  }

  // This rank's pieces, by name.
  std::map<std::string, torch::Tensor> weights() const {
    std::map<std::string, torch::Tensor> values;
    for (const auto& p : trained.optimized) values[p.name] = p.tensor.detach().clone();
    return values;
  }

  parallel::DeviceMesh mesh;
  std::unique_ptr<train::ExpertBalance> experts;
  std::unique_ptr<parallel::ParallelModel> parallel;
  train::TrainedParameters trained;
  std::unique_ptr<optim::AdamW> optimizer;
  std::unique_ptr<train::Schedule> schedule;
  std::unique_ptr<train::RankSums> sums;
  std::unique_ptr<train::TrainingStep> step;
  std::unique_ptr<train::RunState> state;
  std::optional<train::Fault> no_fault;
};

parallel::ParallelDegrees fsdp(int64_t ranks) {
  parallel::ParallelDegrees degrees;
  degrees.fsdp = ranks;
  return degrees;
}

// The loss and every parameter's gradient of one pass over the whole global batch.
std::pair<double, std::map<std::string, torch::Tensor>> one_pass(const data::MicroBatch& batch) {
  auto model = model::declare_model(kShape.config());
  model::materialize(*model, model::init_source(model->init_plan(), kSeed));
  const auto loss = train::training_loss(*model, train::model_batch(batch, torch::kCPU), 0).loss;
  loss.backward();
  std::map<std::string, torch::Tensor> grads;
  for (const auto& item : model->named_parameters()) grads[item.key()] = item.value().grad().reshape(-1).clone();
  return {loss.item<double>(), grads};
}

double grad_norm(const std::map<std::string, torch::Tensor>& grads) {
  double squares = 0;
  for (const auto& [name, grad] : grads) squares += grad.to(torch::kFloat64).square().sum().item<double>();
  return std::sqrt(squares);
}

void require_no_errors(const std::vector<std::string>& errors) {
  for (const auto& error : errors) REQUIRE(error.empty());
}

}  // namespace

TEST_CASE("TrainingStep weighs micro batches by their targets: FSDP 2 and one process give one pass's gradients",
          "[train][step]") {
  const auto batch = rows();
  const auto [expected_loss, expected_grads] = one_pass(join(batch));
  train::StepSettings settings;  // no clipping: the gradients stay as the step left them

  // One process, two micro batches of two rows.
  parallel::ThreadWorld single_world;
  Rank single(testing::thread_mesh(single_world, 0, fsdp(1)), settings);
  const auto single_outcome = single.run(1, {join({batch[0], batch[1]}), join({batch[2], batch[3]})});
  CHECK(single_outcome.loss == Approx(expected_loss).epsilon(1e-6));
  CHECK(single_outcome.grad_norm == Approx(grad_norm(expected_grads)).epsilon(1e-5));
  for (const auto& p : single.trained.optimized) {
    INFO(p.name);
    CHECK(testing::max_relative_error(p.tensor.grad().reshape(-1), expected_grads.at(p.name)) < 1e-4);
  }

  // FSDP over 2 thread ranks, one micro batch each: rank 0 holds 48 targets, rank 1 7.
  parallel::ThreadWorld threads;
  std::vector<train::StepOutcome> outcomes(2);
  std::vector<std::unique_ptr<Rank>> ranks(2);
  require_no_errors(testing::run_ranks(2, [&](int64_t r) {
    auto& rank = ranks[static_cast<size_t>(r)];
    rank = std::make_unique<Rank>(testing::thread_mesh(threads, r, fsdp(2)), settings);
    outcomes[static_cast<size_t>(r)] =
        rank->run(1, {join({batch[static_cast<size_t>(2 * r)], batch[static_cast<size_t>(2 * r + 1)]})});
  }));
  for (int64_t r = 0; r < 2; ++r) {
    const auto& outcome = outcomes[static_cast<size_t>(r)];
    CHECK(outcome.loss == Approx(expected_loss).epsilon(1e-6));
    CHECK(outcome.grad_norm == Approx(grad_norm(expected_grads)).epsilon(1e-5));
    const auto& rank = *ranks[static_cast<size_t>(r)];
    for (size_t i = 0; i < rank.trained.optimized.size(); ++i) {
      const auto& piece = rank.trained.optimized[i];
      const auto& layout = rank.trained.layouts[i];
      if (layout.count == 0) continue;  // the shard holds none of it
      INFO("rank " << r << ": " << piece.name);
      const auto expected = expected_grads.at(piece.name).narrow(0, layout.begin, layout.count);
      CHECK(testing::max_relative_error(piece.tensor.grad(), expected) < 1e-4);
    }
  }
}

TEST_CASE("TrainingStep skips a step whose loss is not finite, and a loss spike, on every rank", "[train][step]") {
  const auto batch = rows();
  train::StepSettings settings;
  settings.detect_spikes = true;
  settings.spike_window = 3;
  settings.spike_zscore = 50;
  settings.chief = false;
  // What each rank saw; Catch's assertions run on the test's thread only.
  struct Seen {
    std::vector<train::StepOutcome> outcomes;  // steps 1-6
    std::map<std::string, torch::Tensor> before, after;  // weights after step 3 and after step 5
    int64_t steps_before = 0, steps_after = 0, steps_at_end = 0, non_finite = 0, spikes_in_a_row = 0;
  };
  std::vector<Seen> seen(2);
  parallel::ThreadWorld threads;
  require_no_errors(testing::run_ranks(2, [&](int64_t r) {
    Rank rank(testing::thread_mesh(threads, r, fsdp(2)), settings);
    auto& mine = seen[static_cast<size_t>(r)];
    const std::vector<data::MicroBatch> batches{
        join({batch[static_cast<size_t>(2 * r)], batch[static_cast<size_t>(2 * r + 1)]})};
    for (int64_t step = 1; step <= 3; ++step) mine.outcomes.push_back(rank.run(step, batches));
    mine.before = rank.weights();
    mine.steps_before = rank.optimizer->steps_taken();
    mine.outcomes.push_back(rank.run(4, batches, std::numeric_limits<double>::quiet_NaN()));
    mine.non_finite = rank.step->non_finite().total();
    mine.outcomes.push_back(rank.run(5, batches, 100.0));
    mine.spikes_in_a_row = rank.step->spikes_in_a_row();
    mine.after = rank.weights();
    mine.steps_after = rank.optimizer->steps_taken();
    mine.outcomes.push_back(rank.run(6, batches));  // the next good step updates again
    mine.steps_at_end = rank.optimizer->steps_taken();
  }));
  for (int64_t r = 0; r < 2; ++r) {
    INFO("rank " << r);
    const auto& mine = seen[static_cast<size_t>(r)];
    for (size_t step = 0; step < 3; ++step) CHECK_FALSE(mine.outcomes[step].skipped);
    CHECK(mine.outcomes[3].skipped);
    CHECK_FALSE(mine.outcomes[3].spike);
    CHECK(mine.non_finite == 1);
    CHECK(mine.outcomes[4].skipped);
    REQUIRE(mine.outcomes[4].spike);
    CHECK(mine.outcomes[4].spike->quantity == "loss");
    CHECK(mine.spikes_in_a_row == 1);
    CHECK(mine.steps_after == mine.steps_before);
    for (const auto& [name, value] : mine.after) {
      INFO(name);
      CHECK(torch::equal(value, mine.before.at(name)));
    }
    CHECK_FALSE(mine.outcomes[5].skipped);
    CHECK(mine.steps_at_end == mine.steps_before + 1);
  }
}

TEST_CASE("RunState rolls back to its checkpoint on every rank, and the step after retraces the first run's",
          "[train][step]") {
  const auto batch = rows();
  testing::ScratchDir dir;
  const ckpt::CheckpointStore store(dir.path().string(), 3);
  struct Seen {
    std::optional<train::Rollback> rollback;
    int64_t step = 0, samples_consumed = 0;
    // After step 1 (saved), after step 2, after the rollback, and after step 2 again.
    std::map<std::string, torch::Tensor> saved, second, rolled_back, second_again;
  };
  std::vector<Seen> seen(2);
  parallel::ThreadWorld threads;
  require_no_errors(testing::run_ranks(2, [&](int64_t r) {
    Rank rank(testing::thread_mesh(threads, r, fsdp(2)), train::StepSettings{});
    auto& mine = seen[static_cast<size_t>(r)];
    train::CheckpointWriter writer(store, *rank.mesh.group(parallel::Dim::world), torch::kCPU, /*background=*/false,
                                   [](int64_t, const std::string&, double, double, double) {});
    const std::vector<data::MicroBatch> batches{
        join({batch[static_cast<size_t>(2 * r)], batch[static_cast<size_t>(2 * r + 1)]})};
    rank.run(1, batches);
    rank.state->save(1, writer, store, nlohmann::json::object(), "", rank.no_fault);
    writer.finish();
    mine.saved = rank.weights();
    rank.run(2, batches);
    mine.second = rank.weights();
    rank.run(3, batches);
    mine.rollback = rank.state->roll_back(store, writer);
    mine.step = rank.state->step;
    mine.samples_consumed = rank.state->samples_consumed;
    mine.rolled_back = rank.weights();
    rank.run(2, batches);
    mine.second_again = rank.weights();
  }));
  for (int64_t r = 0; r < 2; ++r) {
    INFO("rank " << r);
    const auto& mine = seen[static_cast<size_t>(r)];
    REQUIRE(mine.rollback);
    CHECK(mine.rollback->dir.find("step-1") != std::string::npos);
    CHECK(mine.step == 1);
    CHECK(mine.rollback->skipped_from == 4);  // the checkpoint's data position
    CHECK(mine.rollback->skipped_to == 12);   // the data position kept: steps 2 and 3 are skipped
    CHECK(mine.samples_consumed == 12);
    for (const auto& [name, value] : mine.rolled_back) {
      INFO(name);
      CHECK(torch::equal(value, mine.saved.at(name)));
      CHECK(torch::equal(mine.second_again.at(name), mine.second.at(name)));
    }
  }
}
