// The ranks of a job agree on what they train: once every rank has joined the job's store, and
// before any group is made, each rank publishes a fingerprint of its start-up (the xtrain build,
// every recipe key as `xtrain validate` renders it, the size of each file its data sources name)
// and rank 0 compares them. Ranks that disagree would train different models into one
// checkpoint whose recipe.yaml records rank 0's settings only, or wait for groups that never form
// when their layouts differ; instead every rank stops with exit 2 and one message naming the
// ranks and the first key that differs, with both values.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "config/recipe.h"
#include "parallel/process_groups.h"
#include "parallel/world.h"

namespace c10d {
class Store;
}  // namespace c10d

namespace xtrain::train {

struct FingerprintLine {
  std::string key, value;  // "optim.lr", "0.001"
  bool operator==(const FingerprintLine& other) const { return key == other.key && value == other.value; }
};
using Fingerprint = std::vector<FingerprintLine>;

// This process's fingerprint: "xtrain" (the version, build type and LibTorch it was built
// with), then every recipe key in the registry's order, then "data.train source PATH" (and
// data.eval's) with the bytes of the file, folder or Megatron pair each source names.
Fingerprint rank_fingerprint(const config::Recipe& recipe);

// A short, stable digest of a fingerprint (16 hex digits), what the ranks exchange first.
std::string fingerprint_digest(const Fingerprint& fingerprint);

// Empty when every rank's fingerprint (fingerprints[r] is rank r's) equals rank 0's; otherwise
// the message: "recipe mismatch: rank 1 has optim.lr: 0.01, rank 0 has optim.lr: 0.001 (and 1
// more key: run.seed); start every rank with the same recipe and --set options".
std::string disagreement(const std::vector<Fingerprint>& fingerprints);

// The exchange over `store` (keys under `prefix`), for rank `rank` of `size`: returns the
// message of disagreement() as rank 0 found it, the same on every rank. A rank that sends
// nothing within `timeout` ends the job through parallel::collective_failed. Rank 0 returns a
// disagreement only once every rank has read it (or after a few seconds), so that no rank
// finds the store gone, which rank 0 hosts, before it can report the mismatch itself.
std::string exchange_fingerprints(c10d::Store& store, const std::string& prefix, int64_t rank, int64_t size,
                                  const Fingerprint& mine, std::chrono::milliseconds timeout);

// Throws InputError with the message when the job's ranks disagree (a no-op for one process).
void check_ranks_agree(const config::Recipe& recipe, const parallel::ProcessGroups& groups,
                       const parallel::World& world);

}  // namespace xtrain::train
