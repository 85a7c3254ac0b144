// A check of every rank and link of a job, before training or between steps (`xtrain health`,
// dist.health_check). Each rank:
//   - runs a seeded chain of matmuls whose result every healthy rank reproduces bit for bit (the
//     same data, kernels and thread count); a rank whose result differs from the one most ranks
//     hold is named: silent data corruption, or a machine unlike the others;
//   - measures its matmul rate; a rank slower than the median by more than slow_fraction is named;
//   - times all-reduce, all-gather, all-to-all and send/recv (to the next rank, from the
//     previous) on every group of the mesh, as bus bandwidth (the bytes each rank moves over the
//     slowest rank's time, nccl-tests' busbw);
//   - times a small all-reduce's latency on every group, alone and between segments of compute.
// Collective: every rank of the mesh calls it and gets the same report.
//
// XTRAIN_HEALTH_FAULT=slow:R makes rank R repeat its timed matmuls 8 times over (and each training
// step take 40 ms longer), corrupt:R
// perturbs one element of rank R's chain: the switch the tests name a rank with.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <c10/core/Device.h>

#include "config/recipe.h"
#include "parallel/device_mesh.h"
#include "util/test_faults.h"

namespace xtrain::train {

struct HealthOptions {
  int64_t matmul_size = 256;   // n of the n x n matmuls
  int64_t matmul_repeats = 6;  // timed matmuls; the median counts
  int64_t chain_length = 32;   // x <- tanh(A x) steps of the checked chain
  int64_t message_bytes = 4 << 20;  // per collective, per rank
  double slow_fraction = 0.25;
};

struct RankHealth {
  int64_t rank = 0;
  std::string host;
  double matmul_gflops = 0;
  uint64_t result_hash = 0;  // of the chain's result, bit for bit
  bool slow = false, wrong_result = false;
};

struct LinkRate {
  std::string group;       // the mesh group's name: world, dp, fsdp, tp, ...
  int64_t ranks = 0;
  std::string collective;  // all_reduce, all_gather, all_to_all, send_recv
  double seconds = 0;      // the slowest rank's
  double bus_gbps = 0;
};

// What a small (4 KiB) all-reduce costs a call on a group: alone, and added to a loop of compute
// (about 2 ms between calls), the way training meets its blocking collectives.
struct CollectiveLatency {
  std::string group;
  int64_t ranks = 0;
  double alone_s = 0, beside_compute_s = 0;  // the slowest rank's
};

struct HealthReport {
  std::vector<RankHealth> ranks;
  std::vector<LinkRate> links;
  std::vector<CollectiveLatency> latencies;
  double median_gflops = 0;
  bool healthy() const;
  // "rank 2 (host-b): matmul 31.2 GFLOP/s, 0.41 x the median 76.0", one line per named rank.
  std::vector<std::string> problems(const HealthOptions& options) const;
  std::string table() const;  // the ranks, then the links
};

HealthReport check_health(const parallel::DeviceMesh& mesh, const torch::Device& device,
                          const HealthOptions& options = {});

// `xtrain health RECIPE`: the check on the mesh the recipe trains on (its parallel degrees,
// device and backend), every rank joining. Rank 0 prints the table and the named problems.
// Returns 0 when healthy, or with problems and stop false; 3 with problems and stop true.
int run_health_check(const config::Recipe& recipe, const HealthOptions& options, bool stop);

// XTRAIN_HEALTH_FAULT's rank of each kind (-1: none), parsed by util/test_faults.h; a malformed
// value is an InputError.
using util::HealthFault;
HealthFault health_fault();

}  // namespace xtrain::train
