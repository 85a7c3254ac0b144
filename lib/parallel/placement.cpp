#include "parallel/placement.h"

#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace xtrain::parallel {
namespace {

// Of a grid dimension (DeviceMesh::dimensions()).
int64_t size_of(const ParallelDegrees& d, Dim dimension) {
  switch (dimension) {
    case Dim::pp: return d.pp;
    case Dim::dp: return d.dp;
    case Dim::fsdp: return d.fsdp;
    case Dim::cp: return d.cp;
    default: return d.tp;
  }
}

// The groups of one mesh dimension: rank = (((pp_i * dp + dp_i) * fsdp + fsdp_i) * cp + cp_i) * tp + tp_i.
std::vector<std::vector<int64_t>> mesh_groups(const ParallelDegrees& d, Dim dimension, int64_t world_size) {
  const auto& dims = DeviceMesh::dimensions();
  int64_t stride = 1;
  for (auto it = dims.rbegin(); *it != dimension; ++it) stride *= size_of(d, *it);
  const int64_t size = size_of(d, dimension);
  std::vector<std::vector<int64_t>> groups;
  for (int64_t rank = 0; rank < world_size; ++rank) {
    if (rank / stride % size != 0) continue;
    std::vector<int64_t> members;
    for (int64_t k = 0; k < size; ++k) members.push_back(rank + k * stride);
    groups.push_back(members);
  }
  return groups;
}

// Expert groups: ep consecutive token ranks (data x context) of one (pp, tp) place (device_mesh.h).
std::vector<std::vector<int64_t>> expert_groups(const ParallelDegrees& d) {
  const int64_t data_ranks = d.dp * d.fsdp * d.cp;
  std::vector<std::vector<int64_t>> groups;
  for (int64_t stage = 0; stage < d.pp; ++stage)
    for (int64_t first = 0; first < data_ranks; first += d.ep)
      for (int64_t tp_index = 0; tp_index < d.tp; ++tp_index) {
        std::vector<int64_t> members;
        for (int64_t k = 0; k < d.ep; ++k) members.push_back((stage * data_ranks + first + k) * d.tp + tp_index);
        groups.push_back(members);
      }
  return groups;
}

GroupSpan span(Dim dimension, const std::vector<std::vector<int64_t>>& groups, int64_t ranks_per_node) {
  GroupSpan result;
  result.dimension = dimension;
  result.group_size = static_cast<int64_t>(groups.front().size());
  result.groups = static_cast<int64_t>(groups.size());
  for (const auto& group : groups) {
    std::set<int64_t> nodes;
    for (int64_t rank : group) nodes.insert(rank / ranks_per_node);
    result.crossing += nodes.size() > 1 ? 1 : 0;
  }
  result.first_ranks = groups.front();
  for (int64_t rank : groups.front()) {
    const int64_t node = rank / ranks_per_node;
    if (result.first_nodes.empty() || result.first_nodes.back() != node) result.first_nodes.push_back(node);
  }
  return result;
}

}  // namespace

std::vector<GroupSpan> group_spans(const ParallelDegrees& degrees, int64_t world_size, int64_t ranks_per_node) {
  std::vector<GroupSpan> spans;
  for (Dim dimension : DeviceMesh::dimensions())
    if (size_of(degrees, dimension) > 1)
      spans.push_back(span(dimension, mesh_groups(degrees, dimension, world_size), ranks_per_node));
  if (degrees.ep > 1) spans.push_back(span(Dim::ep, expert_groups(degrees), ranks_per_node));
  return spans;
}

std::string describe_placement(const ParallelDegrees& degrees, int64_t world_size, int64_t ranks_per_node) {
  std::string text = fmt::format("placement on {} nodes x {} ranks:", world_size / ranks_per_node, ranks_per_node);
  for (const auto& s : group_spans(degrees, world_size, ranks_per_node)) {
    const std::string where = s.crossing == 0            ? "within a node"
                              : s.crossing == s.groups ? "across nodes"
                                                       : fmt::format("across nodes in {} of them", s.crossing);
    text += fmt::format(" {} {}: {} ({} group{}; ranks {} on node{} {});", to_string(s.dimension), s.group_size,
                        where, s.groups,
                        s.groups == 1 ? "" : "s", fmt::join(s.first_ranks, ","), s.first_nodes.size() == 1 ? "" : "s",
                        fmt::join(s.first_nodes, ","));
  }
  text.pop_back();
  return text;
}

std::optional<std::string> placement_warning(const ParallelDegrees& degrees, int64_t world_size,
                                             int64_t ranks_per_node) {
  if (world_size <= ranks_per_node) return std::nullopt;
  std::vector<std::string> crossing;
  for (const auto& s : group_spans(degrees, world_size, ranks_per_node))
    if ((s.dimension == Dim::tp || s.dimension == Dim::ep || s.dimension == Dim::cp) && s.crossing > 0)
      crossing.push_back(fmt::format("parallel.{} {}", to_string(s.dimension), s.group_size));
  if (crossing.empty()) return std::nullopt;
  return fmt::format("{} cross{} nodes ({} ranks a node): every layer's collectives of {} go over the network. "
                     "Keep them inside a node with a degree that divides the ranks a node holds, and let fsdp, dp or "
                     "pp span the nodes",
                     fmt::join(crossing, " and "), crossing.size() == 1 ? "es" : "", ranks_per_node,
                     crossing.size() == 1 ? "that group" : "those groups");
}

}  // namespace xtrain::parallel
