// What optim.name muon adds to a step (optim/muon.h, docs/recipes.md "Muon"), on one rank:
//   Newton-Schulz   each matrix X [m, n] (transposed so that m <= n) takes, per iteration,
//                   A = X X^T (2 m^2 n FLOPs), B = b A + c A A (2 m^3) and X' = a X + B X
//                   (2 m^2 n): ns_steps x (4 m^2 n + 2 m^3) FLOPs. Every rank orthogonalises
//                   every whole 2-D matrix of its pipeline stage (a tensor-parallel slice is
//                   assembled first) and each expert of its box (experts / (ep x tp)); at the
//                   peak of optim.muon.ns_dtype x the profile's GEMM efficiency.
//   assembly        a matrix sharded by FSDP is all-reduced whole over its shard group (fsdp x
//                   cp; the experts' over fsdp x cp / ep), a tensor-parallel slice over tp too:
//                   fp32, a ring sending 2 (N - 1) / N of it per rank, one collective a matrix
//                   (the profile's collective latency each), nothing to hide it behind (it runs
//                   in the optimizer step).
// A pipeline stage holds share.layers of the layers: it takes that share of the matrices.
#pragma once
#include <cstdint>

#include "config/recipe.h"
#include "plan/cluster_layout.h"
#include "plan/hardware_profile.h"
#include "plan/model_census.h"

namespace xtrain::plan {

// The Newton-Schulz FLOPs of one [rows, cols] matrix over `steps` iterations.
double newton_schulz_flops(int64_t rows, int64_t cols, int64_t steps);

struct MuonCost {
  double flops = 0;          // Newton-Schulz, this rank, a step
  double sent_bytes = 0;     // the assembly's, this rank, a step
  double collectives = 0;    // the assembly's all-reduces a step
  double compute_s = 0, communication_s = 0;
};

// `stage_layers` of the census's layers are this rank's (pipeline parallelism).
MuonCost muon_cost(const ModelCensus& census, const config::Recipe& recipe, const ClusterLayout& layout,
                   const HardwareProfile& hardware, double stage_layers);

}  // namespace xtrain::plan
