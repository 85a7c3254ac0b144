#include "dist/device_mesh.h"

#include <chrono>
#include <vector>

#include <fmt/format.h>

#include "dist/process_groups.h"
#include "util/input_error.h"

namespace xtrain::dist {

ParallelDegrees resolve_degrees(ParallelDegrees d, int64_t world_size) {
  struct Named {
    const char* key;
    int64_t* value;
  };
  const Named degrees[] = {{"parallel.dp", &d.dp}, {"parallel.fsdp", &d.fsdp}, {"parallel.tp", &d.tp},
                           {"parallel.pp", &d.pp}, {"parallel.ep", &d.ep}};
  int64_t known = 1;
  int64_t* rest = nullptr;
  const char* rest_key = nullptr;
  for (const auto& [key, value] : degrees) {
    if (*value == -1) {
      if (rest)
        throw InputError(fmt::format("{} and {} are both -1: at most one degree can take \"the rest\"", rest_key, key));
      rest = value;
      rest_key = key;
    } else {
      known *= *value;
    }
  }
  auto product = [&] { return fmt::format("dp {} x fsdp {} x tp {} x pp {} x ep {}", d.dp, d.fsdp, d.tp, d.pp, d.ep); };
  if (rest) {
    if (world_size % known != 0)
      throw InputError(fmt::format("{} = -1 cannot fill the world of {} ranks: the other degrees multiply to {}, "
                                   "which does not divide {}",
                                   rest_key, world_size, known, world_size));
    *rest = world_size / known;
  }
  if (d.dp * d.fsdp * d.tp * d.pp * d.ep != world_size)
    throw InputError(fmt::format("parallel degrees {} = {} ranks, but the job has {} (WORLD_SIZE); make the "
                                 "product equal the number of processes, or set one degree to -1",
                                 product(), d.dp * d.fsdp * d.tp * d.pp * d.ep, world_size));
  for (const auto& [key, value] : degrees) {
    const std::string name = key;
    if (*value > 1 && (name == "parallel.tp" || name == "parallel.pp" || name == "parallel.ep"))
      throw InputError(fmt::format("{} = {}: tensor, pipeline and expert parallelism are not yet supported; "
                                   "use parallel.dp and parallel.fsdp",
                                   key, *value));
  }
  return d;
}

std::string DeviceMesh::describe() const {
  if (!world.distributed()) return "1 process";
  std::string layout = degrees.dp > 1 && degrees.fsdp > 1 ? fmt::format("HSDP dp {} x fsdp {}", degrees.dp, degrees.fsdp)
                       : degrees.fsdp > 1                  ? fmt::format("FSDP {}", degrees.fsdp)
                                                           : fmt::format("DDP {}", degrees.dp);
  return fmt::format("{} ranks ({}), {}", world.size, world.source, layout);
}

DeviceMesh build_mesh(const World& world, const ParallelDegrees& degrees, double timeout_s, CommBackend backend,
                      double init_timeout_s) {
  DeviceMesh mesh;
  mesh.world = world;
  mesh.degrees = degrees;
  if (!world.distributed()) {
    mesh.world_comm = make_single_process_comm("world");
    mesh.fsdp = make_single_process_comm("fsdp");
    mesh.dp = make_single_process_comm("dp");
    return mesh;
  }
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  mesh.groups = std::make_shared<ProcessGroups>(
      world, timeout, backend, std::chrono::milliseconds(static_cast<int64_t>(init_timeout_s * 1000)));
  std::vector<int64_t> all(world.size);
  for (int64_t r = 0; r < world.size; ++r) all[r] = r;
  mesh.world_comm = mesh.groups->make_group("world", all);
  const int64_t dp_index = world.rank / degrees.fsdp, fsdp_index = world.rank % degrees.fsdp;
  std::vector<int64_t> shard_ranks, replica_ranks;
  for (int64_t i = 0; i < degrees.fsdp; ++i) shard_ranks.push_back(dp_index * degrees.fsdp + i);
  for (int64_t i = 0; i < degrees.dp; ++i) replica_ranks.push_back(i * degrees.fsdp + fsdp_index);
  mesh.fsdp = mesh.groups->make_group("fsdp", shard_ranks);
  mesh.dp = mesh.groups->make_group("dp", replica_ranks);
  return mesh;
}

}  // namespace xtrain::dist
