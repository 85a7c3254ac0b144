// Muon against torch.optim.Muon (tools/reference/muon.py) over 10 steps for each adjust_lr rule,
// an expert stack against torch.optim.Muon on each expert's matrix, the split between Muon and
// AdamW, pieces assembled over 2 thread ranks against one process, and the trap: the same
// pieces orthogonalised alone fail that comparison; tensor-parallel slices of FSDP pieces over
// 4 thread ranks against one process.
#include <cstdlib>

#include <fmt/format.h>
#include <torch/torch.h>

#include <catch2/catch.hpp>

#include "ckpt/safetensors.h"
#include "optim/muon.h"
#include "parallel/rank_threads.h"
#include "parallel/thread_comm.h"
#include "scratch_dir.h"

using namespace xtrain;

// Named, not anonymous: the unit tests build as unity files.
namespace muon_test {

constexpr int64_t kSteps = 10;
// Wide, tall and square matrices, and a stack of 3 experts' [6 x 10] matrices.
const std::vector<std::vector<int64_t>> kShapes = {{16, 40}, {48, 12}, {24, 24}, {3, 6, 10}};

struct Problem {
  std::vector<torch::Tensor> params;
  std::vector<double> lrs;
  std::vector<std::vector<torch::Tensor>> grads;  // [t][i]
};

Problem make_problem() {
  torch::manual_seed(1234);
  Problem problem;
  for (const auto& shape : kShapes) problem.params.push_back(torch::randn(shape) * 0.2);
  for (int64_t t = 0; t < kSteps; ++t) {
    problem.lrs.push_back(2e-2 * (1.0 - 0.05 * static_cast<double>(t)));
    std::vector<torch::Tensor> grads;
    for (const auto& p : problem.params) grads.push_back(torch::randn(p.sizes()) * 0.1 + 0.01 * static_cast<double>(t));
    problem.grads.push_back(grads);
  }
  return problem;
}

optim::MuonOptions options_for(optim::MuonAdjustLr rule) {
  optim::MuonOptions options;
  options.momentum = 0.9;
  options.nesterov = true;
  options.ns_steps = 5;
  options.adjust_lr = rule;
  options.weight_decay = 0.1;
  return options;
}

ckpt::TensorMap run_reference(const Problem& problem, const optim::MuonOptions& o) {
  ckpt::TensorMap in;
  for (size_t i = 0; i < problem.params.size(); ++i) in[fmt::format("param.{}", i)] = problem.params[i];
  for (int64_t t = 0; t < kSteps; ++t)
    for (size_t i = 0; i < problem.params.size(); ++i) in[fmt::format("grad.{}.{}", t, i)] = problem.grads[t][i];
  in["lr"] = torch::tensor(problem.lrs, torch::kFloat64);
  in["hyper"] = torch::tensor(std::vector<double>{o.momentum, o.nesterov ? 1.0 : 0.0, o.weight_decay,
                                                  o.adjust_lr == optim::MuonAdjustLr::match_rms_adamw ? 1.0 : 0.0,
                                                  static_cast<double>(o.ns_steps)},
                              torch::kFloat64);
  testing::ScratchDir scratch;
  const auto inputs = (scratch.path() / "in.safetensors").string(), out = (scratch.path() / "out.safetensors").string();
  ckpt::save_safetensors(inputs, in);
  const auto command = fmt::format("{} {}/tools/reference/muon.py --inputs {} --out {}", XTRAIN_PYTHON,
                                   XTRAIN_SOURCE_DIR, inputs, out);
  REQUIRE(std::system(command.c_str()) == 0);
  return ckpt::load_safetensors(out).tensors;
}

double max_abs_difference(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

// One process: every parameter whole.
struct Whole {
  std::vector<torch::Tensor> params;
  std::unique_ptr<optim::Muon> optimizer;

  Whole(const Problem& problem, const optim::MuonOptions& options) {
    std::vector<optim::MuonMatrix> matrices;
    for (size_t i = 0; i < problem.params.size(); ++i) {
      params.push_back(problem.params[i].clone());
      matrices.push_back(
          {{fmt::format("p{}", i), params.back(), true, false}, problem.params[i].sizes().vec(), 0, {}, {}, {}, {}});
    }
    optimizer = std::make_unique<optim::Muon>(std::vector<optim::NamedParameter>{}, matrices, optim::AdamWOptions{},
                                              options);
  }
  void run(const Problem& problem, int64_t from, int64_t to) {
    for (int64_t t = from; t < to; ++t) {
      for (size_t i = 0; i < params.size(); ++i) params[i].mutable_grad() = problem.grads[t][i].clone();
      optimizer->step(problem.lrs[t]);
    }
  }
};

TEST_CASE("Muon follows torch.optim.Muon over 10 steps for each adjust_lr rule", "[optim][muon]") {
  const auto problem = make_problem();
  for (const auto rule : {optim::MuonAdjustLr::original, optim::MuonAdjustLr::match_rms_adamw}) {
    const bool original = rule == optim::MuonAdjustLr::original;
    INFO((original ? "original" : "match_rms_adamw"));
    const auto options = options_for(rule);
    const auto golden = run_reference(problem, options);
    Whole xtrain(problem, options);
    xtrain.run(problem, 0, kSteps);
    const auto state = xtrain.optimizer->state();
    double worst = 0;
    for (size_t i = 0; i < kShapes.size(); ++i) {
      INFO("parameter " << i);
      const double params = max_abs_difference(xtrain.params[i], golden.at(fmt::format("param.{}", i)));
      const double momenta =
          max_abs_difference(state.at(fmt::format("exp_avg.p{}", i)), golden.at(fmt::format("momentum.{}", i)));
      CHECK(params <= 1e-6);
      CHECK(momenta <= 1e-6);
      // Not vacuous: the parameters moved.
      CHECK(max_abs_difference(xtrain.params[i], problem.params[i]) > 1e-2);
      worst = std::max({worst, params, momenta});
    }
    WARN("Muon (" << (original ? "original" : "match_rms_adamw")
                  << ") against torch.optim.Muon, 10 steps: worst max abs difference " << worst);
  }
}

TEST_CASE("Muon takes the hidden matrices and expert stacks; AdamW the embeddings, head, routers, norms",
          "[optim][muon]") {
  CHECK(optim::muon_takes("model.layers.0.self_attn.q_proj.weight", 2));
  CHECK(optim::muon_takes("model.layers.3.mlp.down_proj.weight", 2));
  CHECK(optim::muon_takes("model.layers.1.mlp.experts.gate_up_proj", 3));
  CHECK(optim::muon_takes("model.layers.1.mlp.shared_experts.up_proj.weight", 2));
  CHECK_FALSE(optim::muon_takes("model.embed_tokens.weight", 2));
  CHECK_FALSE(optim::muon_takes("lm_head.weight", 2));
  CHECK_FALSE(optim::muon_takes("model.layers.1.mlp.gate.weight", 2));
  CHECK_FALSE(optim::muon_takes("model.layers.1.mlp.shared_expert_gate.weight", 2));
  CHECK_FALSE(optim::muon_takes("model.norm.weight", 1));
  CHECK_FALSE(optim::muon_takes("model.layers.0.self_attn.q_proj.bias", 1));
  CHECK_FALSE(optim::muon_takes("model.layers.1.mlp.experts.gate_up_proj_bias", 2));  // [experts, out]: biases
  CHECK_FALSE(optim::muon_takes("model.layers.1.mlp.experts.gate_up_proj_bias", 3));
}

TEST_CASE("Muon over 2 thread ranks' pieces equals one process; each piece orthogonalised alone does not",
          "[optim][muon]") {
  const auto problem = make_problem();
  const auto options = options_for(optim::MuonAdjustLr::match_rms_adamw);
  Whole whole(problem, options);
  whole.run(problem, 0, kSteps);
  for (const auto mode : {optim::MuonOrthogonalize::whole, optim::MuonOrthogonalize::piece}) {
    const bool trap = mode == optim::MuonOrthogonalize::piece;
    INFO((trap ? "pieces orthogonalised alone" : "whole matrices assembled"));
    constexpr int64_t ranks = 2;
    const auto comms = parallel::make_thread_comms(ranks, "fsdp");
    // Rank r holds elements [r * n / 2, (r + 1) * n / 2) of each flattening (an FSDP shard's cut,
    // which here falls mid-row for the tall matrix and mid-expert for the stack).
    std::vector<std::vector<torch::Tensor>> pieces(ranks);
    std::vector<std::unique_ptr<optim::Muon>> optimizers;
    for (int64_t r = 0; r < ranks; ++r) {
      std::vector<optim::MuonMatrix> matrices;
      auto comm = comms[r];
      for (size_t i = 0; i < problem.params.size(); ++i) {
        const int64_t n = problem.params[i].numel(), begin = r * n / ranks, end = (r + 1) * n / ranks;
        pieces[r].push_back(problem.params[i].reshape(-1).slice(0, begin, end).clone());
        matrices.push_back({{fmt::format("p{}", i), pieces[r].back(), true, false}, kShapes[i], begin, {}, {}, {}, {}});
        matrices.back().sum_pieces = [comm](torch::Tensor& box) { comm->all_reduce_sum(box).wait(); };
      }
      auto o = options;
      o.orthogonalize = mode;
      optimizers.push_back(
          std::make_unique<optim::Muon>(std::vector<optim::NamedParameter>{}, matrices, optim::AdamWOptions{}, o));
    }
    const auto errors = testing::run_ranks(ranks, [&](int64_t r) {
      for (int64_t t = 0; t < kSteps; ++t) {
        for (size_t i = 0; i < problem.params.size(); ++i) {
          const int64_t n = problem.params[i].numel(), begin = r * n / ranks, end = (r + 1) * n / ranks;
          pieces[r][i].mutable_grad() = problem.grads[t][i].reshape(-1).slice(0, begin, end).clone();
        }
        optimizers[r]->step(problem.lrs[t]);
      }
    });
    for (const auto& e : errors) REQUIRE(e.empty());
    double worst = 0;
    for (size_t i = 0; i < problem.params.size(); ++i) {
      const auto assembled = torch::cat({pieces[0][i], pieces[1][i]}).view(kShapes[i]);
      worst = std::max(worst, max_abs_difference(assembled, whole.params[i]));
    }
    WARN((trap ? "pieces orthogonalised alone" : "whole matrices assembled")
         << " over 2 ranks against one process, 10 steps: max abs difference " << worst);
    if (trap)
      CHECK(worst > 1e-3);
    else
      CHECK(worst <= 1e-6);
  }
}

TEST_CASE("Muon over tensor-parallel slices (rows or columns) of FSDP pieces equals one process", "[optim][muon]") {
  const auto problem = make_problem();
  const auto options = options_for(optim::MuonAdjustLr::original);
  Whole whole(problem, options);
  whole.run(problem, 0, kSteps);
  // 4 thread ranks, rank = 2 * f + t: tp rank t holds a box (the first matrix's rows split, the
  // others' columns; the stack's experts split 2 + 1), and fsdp rank f half of the box's flattening.
  constexpr int64_t ranks = 4;
  std::vector<std::vector<std::shared_ptr<parallel::Comm>>> tp, fsdp;
  for (int g = 0; g < 2; ++g) {
    tp.push_back(parallel::make_thread_comms(2, "tp"));
    fsdp.push_back(parallel::make_thread_comms(2, "fsdp"));
  }
  struct Part {
    std::vector<int64_t> offsets, sizes;
    int64_t begin, end;
  };
  auto part_of = [](size_t i, int64_t r) {
    const int64_t f = r / 2, t = r % 2;
    const auto& shape = kShapes[i];
    Part part{std::vector<int64_t>(shape.size(), 0), shape, 0, 0};
    const size_t dim = i == 0 || shape.size() == 3 ? 0 : 1;
    const int64_t first = t == 0 ? 0 : (shape[dim] + 1) / 2;
    part.offsets[dim] = first;
    part.sizes[dim] = t == 0 ? (shape[dim] + 1) / 2 : shape[dim] - first;
    int64_t box = 1;
    for (int64_t size : part.sizes) box *= size;
    part.begin = f * box / 2;
    part.end = (f + 1) * box / 2;
    return part;
  };
  auto box_values = [](const torch::Tensor& whole, const Part& part) {
    auto box = whole;
    for (size_t d = 0; d < part.sizes.size(); ++d)
      box = box.narrow(static_cast<int64_t>(d), part.offsets[d], part.sizes[d]);
    return box.reshape(-1).slice(0, part.begin, part.end).clone();
  };
  std::vector<std::vector<torch::Tensor>> pieces(ranks);
  std::vector<std::unique_ptr<optim::Muon>> optimizers;
  for (int64_t r = 0; r < ranks; ++r) {
    const int64_t f = r / 2, t = r % 2;
    auto tp_comm = tp[f][t], fsdp_comm = fsdp[t][f];
    std::vector<optim::MuonMatrix> matrices;
    for (size_t i = 0; i < problem.params.size(); ++i) {
      const auto part = part_of(i, r);
      pieces[r].push_back(box_values(problem.params[i], part));
      matrices.push_back({{fmt::format("p{}", i), pieces[r].back(), true, false}, kShapes[i], part.begin,
                          part.offsets, part.sizes, {}, {}});
      matrices.back().sum_pieces = [fsdp_comm](torch::Tensor& box) { fsdp_comm->all_reduce_sum(box).wait(); };
      if (kShapes[i].size() == 2)
        matrices.back().sum_boxes = [tp_comm](torch::Tensor& all) { tp_comm->all_reduce_sum(all).wait(); };
    }
    optimizers.push_back(
        std::make_unique<optim::Muon>(std::vector<optim::NamedParameter>{}, matrices, optim::AdamWOptions{}, options));
  }
  const auto errors = testing::run_ranks(ranks, [&](int64_t r) {
    for (int64_t t = 0; t < kSteps; ++t) {
      for (size_t i = 0; i < problem.params.size(); ++i)
        pieces[r][i].mutable_grad() = box_values(problem.grads[t][i], part_of(i, r));
      optimizers[r]->step(problem.lrs[t]);
    }
  });
  for (const auto& e : errors) REQUIRE(e.empty());
  double worst = 0;
  for (int64_t r = 0; r < ranks; ++r)
    for (size_t i = 0; i < problem.params.size(); ++i)
      worst = std::max(worst, max_abs_difference(pieces[r][i], box_values(whole.params[i], part_of(i, r))));
  WARN("slices of 2 tp ranks in pieces of 2 fsdp ranks against one process, 10 steps: max abs difference " << worst);
  CHECK(worst <= 1e-6);
}

TEST_CASE("Muon resumes from its saved state bit for bit", "[optim][muon]") {
  const auto problem = make_problem();
  const auto options = options_for(optim::MuonAdjustLr::original);
  Whole straight(problem, options);
  straight.run(problem, 0, kSteps);
  Whole first(problem, options);
  first.run(problem, 0, 4);
  const auto saved = first.optimizer->state();
  CHECK(saved.at("step").item<int64_t>() == 4);
  CHECK(saved.at("exp_avg_sq.p0").abs().max().item<double>() == 0);  // kept for the checkpoint layout
  Whole resumed(problem, options);
  for (size_t i = 0; i < kShapes.size(); ++i) resumed.params[i].detach().copy_(first.params[i]);
  resumed.optimizer->load_state(saved);
  resumed.run(problem, 4, kSteps);
  for (size_t i = 0; i < kShapes.size(); ++i) CHECK(torch::equal(resumed.params[i], straight.params[i]));
}

}  // namespace muon_test
