#include "layout/mesh_dim.h"

namespace xtrain::parallel {

bool is_grid_dim(Dim value) {
  switch (value) {
    case Dim::pp:
    case Dim::dp:
    case Dim::fsdp:
    case Dim::cp:
    case Dim::tp: return true;
    case Dim::ep:
    case Dim::edp:
    case Dim::world:
    case Dim::self: return false;
  }
  return false;
}

}  // namespace xtrain::parallel
