// The dimensions of the device mesh (parallel/device_mesh.h) and its two whole-job groups. pp,
// dp, fsdp, cp and tp are the mesh's grid, outermost first; ep and edp fold into the data and
// context ranks; world is every rank and self this rank alone. The names are those of the
// recipe's parallel.* keys, of the process groups and of messages (util/choice.h). No LibTorch:
// the recipe (config/recipe.h) and the shard plans (model/shard_plan.h) name them too. The
// enums keep the namespace of the mesh that groups ranks by them.
#pragma once
#include "util/choice.h"

namespace xtrain::parallel {

enum class Dim { pp, dp, fsdp, cp, tp, ep, edp, world, self };

// parallel.cp_kind: how attention sees the rest of a row split over the cp ranks.
enum class ContextKind { ring, ulysses };

XTRAIN_CHOICES_BEGIN
constexpr const char* to_string(Dim value) {
  switch (value) {
    case Dim::pp: return "pp";
    case Dim::dp: return "dp";
    case Dim::fsdp: return "fsdp";
    case Dim::cp: return "cp";
    case Dim::tp: return "tp";
    case Dim::ep: return "ep";
    case Dim::edp: return "edp";
    case Dim::world: return "world";
    case Dim::self: return "self";
  }
  return nullptr;
}

constexpr const char* to_string(ContextKind value) {
  switch (value) {
    case ContextKind::ring: return "ring";
    case ContextKind::ulysses: return "ulysses";
  }
  return nullptr;
}
XTRAIN_CHOICES_END

// Whether the dimension is one of the grid's (pp, dp, fsdp, cp, tp), which flatten() combines.
bool is_grid_dim(Dim value);

}  // namespace xtrain::parallel
