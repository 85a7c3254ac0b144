// The CPU time of the calling thread: what it computed, not the time it waited for a core or a
// peer. On a machine with fewer cores than ranks, a pass timed by the wall clock also counts the
// time its rank was not scheduled; its CPU time does not.
#pragma once

namespace xtrain::util {

double thread_cpu_seconds();

}  // namespace xtrain::util
