// A DeviceMesh of in-process ranks: rank `rank` of a ThreadWorld, laid out by `degrees`, its
// groups made among the world's threads (tests run one thread per rank, rank_threads.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "parallel/device_mesh.h"
#include "parallel/thread_comm.h"
#include "parallel/world.h"

namespace xtrain::testing {

inline parallel::DeviceMesh thread_mesh(parallel::ThreadWorld& threads, int64_t rank,
                                        const parallel::ParallelDegrees& degrees) {
  parallel::World world;
  world.rank = rank;
  world.size = degrees.dp * degrees.fsdp * degrees.tp * degrees.pp;
  return parallel::DeviceMesh(world, degrees,
                              [&threads, rank](const std::string& name, const std::vector<int64_t>& ranks) {
                                return threads.make_group(rank, name, ranks);
                              });
}

}  // namespace xtrain::testing
