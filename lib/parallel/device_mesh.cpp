#include "parallel/device_mesh.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "parallel/process_groups.h"
#include "util/input_error.h"

namespace xtrain::parallel {

ParallelDegrees resolve_degrees(ParallelDegrees d, int64_t world_size) {
  struct Named {
    const char* key;
    int64_t* value;
  };
  // The degrees whose product is the world; ep folds into dp x fsdp.
  const Named degrees[] = {{"parallel.dp", &d.dp}, {"parallel.fsdp", &d.fsdp}, {"parallel.cp", &d.cp},
                           {"parallel.tp", &d.tp}, {"parallel.pp", &d.pp}};
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
  auto product = [&] {
    return d.cp > 1 ? fmt::format("dp {} x fsdp {} x cp {} x tp {} x pp {}", d.dp, d.fsdp, d.cp, d.tp, d.pp)
                    : fmt::format("dp {} x fsdp {} x tp {} x pp {}", d.dp, d.fsdp, d.tp, d.pp);
  };
  if (rest) {
    if (world_size % known != 0)
      throw InputError(fmt::format("{} = -1 cannot fill the world of {} ranks: the other degrees multiply to {}, "
                                   "which does not divide {}",
                                   rest_key, world_size, known, world_size));
    *rest = world_size / known;
  }
  const int64_t ranks = d.dp * d.fsdp * d.cp * d.tp * d.pp;
  if (ranks != world_size)
    throw InputError(fmt::format("parallel degrees {} = {} ranks, but the job has {} (WORLD_SIZE); make the "
                                 "product equal the number of processes, or set one degree to -1",
                                 product(), ranks, world_size));
  if (d.ep < 1 || (d.dp * d.fsdp * d.cp) % d.ep != 0)
    throw InputError(fmt::format("parallel.ep = {} must divide the {} ranks, dp {} x fsdp {}{} = {}: experts are "
                                 "split over ep of them and sharded over the rest",
                                 d.ep, d.cp > 1 ? "token" : "data", d.dp, d.fsdp,
                                 d.cp > 1 ? fmt::format(" x cp {}", d.cp) : "", d.dp * d.fsdp * d.cp));
  return d;
}

namespace {

std::string joined(const std::vector<Dim>& dims, const char* separator) {
  std::vector<std::string> names;
  for (Dim d : dims) names.emplace_back(to_string(d));
  return fmt::format("{}", fmt::join(names, separator));
}

}  // namespace

const std::vector<Dim>& DeviceMesh::dimensions() {
  static const std::vector<Dim> order{Dim::pp, Dim::dp, Dim::fsdp, Dim::cp, Dim::tp};
  return order;
}

DeviceMesh::DeviceMesh(World world, ParallelDegrees degrees, const GroupFactory& make_group,
                       std::shared_ptr<ProcessGroups> groups)
    : world_(std::move(world)), degrees_(degrees), process_groups_(std::move(groups)) {
  const auto& dims = dimensions();
  int64_t ranks = 1;
  for (const auto& d : dims) ranks *= size(d);
  if (ranks != world_.size)
    throw std::invalid_argument(fmt::format("a mesh of {} ranks for a world of {}", ranks, world_.size));
  std::vector<int64_t> everyone(static_cast<size_t>(world_.size));
  for (int64_t r = 0; r < world_.size; ++r) everyone[static_cast<size_t>(r)] = r;
  const std::string world_name = to_string(Dim::world), self_name = to_string(Dim::self);
  groups_[world_name] = world_.size == 1 ? make_single_process_comm(world_name) : make_group(world_name, everyone);
  groups_[self_name] = make_single_process_comm(self_name);
  // Every set of dimensions, in the same order on every rank. Sets that differ only by
  // dimensions of size 1 share one group, named by the others.
  std::map<std::string, std::shared_ptr<Comm>> by_ranks_name;
  for (unsigned mask = 1; mask < (1u << dims.size()); ++mask) {
    std::vector<Dim> along, wide;
    for (size_t i = 0; i < dims.size(); ++i)
      if (mask & (1u << i)) {
        along.push_back(dims[i]);
        if (size(dims[i]) > 1) wide.push_back(dims[i]);
      }
    const std::string name = joined(along, "_");
    if (wide.empty()) {
      groups_[name] = make_single_process_comm(name);
      continue;
    }
    const std::string shared_name = joined(wide, "_");
    auto& comm = by_ranks_name[shared_name];
    if (!comm) comm = make_group(shared_name, ranks_along(wide));
    groups_[name] = comm;
  }
  build_expert_groups(make_group, by_ranks_name);
}

// "ep" and "edp" over this (pp, tp) place's token ranks; a group that equals one built already
// (ep 1: edp is dp_fsdp_cp) is shared, one of a single rank needs no process group.
void DeviceMesh::build_expert_groups(const GroupFactory& make_group,
                                     std::map<std::string, std::shared_ptr<Comm>>& by_ranks_name) {
  const int64_t tokens = token_size(), here = token_rank(), ep = degrees_.ep;
  const int64_t base = world_.rank - here * size(Dim::tp);  // token rank 0 at this (pp, tp)
  auto world_rank = [&](int64_t token_rank) { return base + token_rank * size(Dim::tp); };
  std::vector<int64_t> ep_ranks, edp_ranks;
  for (int64_t i = 0; i < ep; ++i) ep_ranks.push_back(world_rank(here / ep * ep + i));
  for (int64_t i = 0; i < tokens / ep; ++i) edp_ranks.push_back(world_rank(here % ep + i * ep));
  for (const auto& [dim, ranks] : {std::pair{Dim::ep, ep_ranks}, std::pair{Dim::edp, edp_ranks}}) {
    const std::string name = to_string(dim);
    if (ranks.size() == 1) {
      groups_[name] = make_single_process_comm(name);
    } else if (dim == Dim::edp && ep == 1) {
      groups_[name] = flatten({Dim::dp, Dim::fsdp, Dim::cp});
    } else {
      auto& comm = by_ranks_name[name];
      if (!comm) comm = make_group(name, ranks);
      groups_[name] = comm;
    }
  }
}

std::vector<int64_t> DeviceMesh::ranks_along(const std::vector<Dim>& along) const {
  // This rank with the coordinates along `along` replaced by every combination, outermost first.
  std::vector<int64_t> ranks{world_.rank};
  for (Dim d : along) {
    const int64_t s = stride(d), here = coordinate(d) * s;
    std::vector<int64_t> next;
    for (int64_t base : ranks)
      for (int64_t i = 0; i < size(d); ++i) next.push_back(base - here + i * s);
    ranks = std::move(next);
  }
  return ranks;
}

int64_t DeviceMesh::size(Dim dimension) const {
  switch (dimension) {
    case Dim::pp: return degrees_.pp;
    case Dim::dp: return degrees_.dp;
    case Dim::fsdp: return degrees_.fsdp;
    case Dim::cp: return degrees_.cp;
    case Dim::tp: return degrees_.tp;
    case Dim::ep: return degrees_.ep;
    case Dim::edp: return token_size() / degrees_.ep;
    case Dim::world: return world_.size;
    case Dim::self: return 1;
  }
  return 1;  // not reached: the switch covers every dimension
}

// Of a grid dimension: the product of the sizes of those inside it.
int64_t DeviceMesh::stride(Dim dimension) const {
  int64_t stride = 1;
  const auto& dims = dimensions();
  for (auto d = dims.rbegin(); d != dims.rend() && *d != dimension; ++d) stride *= size(*d);
  return stride;
}

int64_t DeviceMesh::coordinate(Dim dimension) const {
  switch (dimension) {
    case Dim::pp:
    case Dim::dp:
    case Dim::fsdp:
    case Dim::cp:
    case Dim::tp: return world_.rank / stride(dimension) % size(dimension);
    case Dim::ep: return token_rank() % degrees_.ep;
    case Dim::edp: return token_rank() / degrees_.ep;
    case Dim::world: return world_.rank;
    case Dim::self: return 0;
  }
  return 0;  // not reached: the switch covers every dimension
}

const std::shared_ptr<Comm>& DeviceMesh::group(Dim dimension) const { return groups_.at(to_string(dimension)); }

const std::shared_ptr<Comm>& DeviceMesh::shard_group(Dim dimension) const {
  return dimension == Dim::fsdp ? flatten({Dim::fsdp, Dim::cp}) : group(dimension);
}

const std::shared_ptr<Comm>& DeviceMesh::flatten(const std::vector<Dim>& along) const {
  for (Dim d : along)
    if (!is_grid_dim(d))
      throw std::invalid_argument(fmt::format("no mesh dimension '{}' (dimensions: {})", to_string(d),
                                              joined(dimensions(), ", ")));
  std::vector<Dim> ordered;
  for (Dim d : dimensions())
    if (std::find(along.begin(), along.end(), d) != along.end()) ordered.push_back(d);
  if (ordered.size() != along.size() || ordered.empty())
    throw std::invalid_argument(fmt::format("flatten({{{}}}): each dimension once, at least one", joined(along, ", ")));
  return groups_.at(joined(ordered, "_"));
}

std::vector<std::shared_ptr<Comm>> DeviceMesh::distinct_groups() const {
  std::vector<std::shared_ptr<Comm>> distinct;
  for (const auto& [name, comm] : groups_)
    if (std::find(distinct.begin(), distinct.end(), comm) == distinct.end()) distinct.push_back(comm);
  return distinct;
}

std::string DeviceMesh::describe() const {
  if (!world_.distributed()) return "1 process";
  const auto& degrees = degrees_;
  std::string layout = degrees.dp > 1 && degrees.fsdp > 1 ? fmt::format("HSDP dp {} x fsdp {}", degrees.dp, degrees.fsdp)
                       : degrees.fsdp > 1                  ? fmt::format("FSDP {}", degrees.fsdp)
                                                           : fmt::format("DDP {}", degrees.dp);
  if (degrees.ep > 1)
    layout += fmt::format(", experts split over ep {} and sharded over {}", degrees.ep, size(Dim::edp));
  if (degrees.cp > 1)
    layout += fmt::format(", context-parallel over cp {} (parameters sharded over fsdp x cp = {})", degrees.cp,
                          degrees.fsdp * degrees.cp);
  if (degrees.tp > 1) layout += fmt::format(", tensor-parallel over tp {}", degrees.tp);
  if (degrees.pp > 1) layout += fmt::format(", {} pipeline stages", degrees.pp);
  return fmt::format("{} ranks ({}), {}", world_.size, world_.source, layout);
}

DeviceMesh build_mesh(const World& world, const ParallelDegrees& degrees, double timeout_s, CommBackend backend,
                      double init_timeout_s) {
  if (!world.distributed())
    return DeviceMesh(world, degrees, [](const std::string& name, const std::vector<int64_t>&) -> std::shared_ptr<Comm> {
      throw std::logic_error("one process needs no group, asked for " + name);
    });
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  auto groups = std::make_shared<ProcessGroups>(
      world, timeout, backend, std::chrono::milliseconds(static_cast<int64_t>(init_timeout_s * 1000)));
  return DeviceMesh(
      world, degrees,
      [&groups](const std::string& name, const std::vector<int64_t>& ranks) { return groups->make_group(name, ranks); },
      groups);
}

}  // namespace xtrain::parallel
