// A preloaded library that tells heap fragmentation apart from live memory in any process:
// it samples glibc's mallinfo2() every 2 ms and, at exit, prints to stderr the peak of the bytes
// malloc has handed out and not taken back (live: tensors and everything else), the peak of the
// heap's footprint (arenas plus mmapped blocks: what it holds from the kernel) and the peak of
// the free space inside the arenas. A footprint above the live peak is memory the heap keeps that
// no allocation uses at the heap's high-water mark.
//
//   LD_PRELOAD=$PWD/build/tools/bench/libheap_probe.so build/xtrain launch ... -- train RECIPE ...
//   prints "heap_probe rank R: peak live heap L MiB, peak footprint F MiB, peak free inside P MiB"
#include <malloc.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace {

std::atomic<size_t> peak_live{0}, peak_footprint{0}, peak_free{0};
std::atomic<bool> finished{false};

void raise_to(std::atomic<size_t>& peak, size_t value) {
  if (value > peak.load(std::memory_order_relaxed)) peak.store(value, std::memory_order_relaxed);
}

void* sample(void*) {
  while (!finished) {
    const struct mallinfo2 m = mallinfo2();
    const size_t live = m.uordblks + m.hblkhd, footprint = m.arena + m.hblkhd;
    raise_to(peak_live, live);
    raise_to(peak_footprint, footprint);
    raise_to(peak_free, m.fordblks);
    usleep(2000);
  }
  return nullptr;
}

__attribute__((constructor)) void start_sampling() {
  pthread_t thread;
  if (pthread_create(&thread, nullptr, sample, nullptr) == 0) pthread_detach(thread);
}

__attribute__((destructor)) void report() {
  finished = true;
  const char* rank = std::getenv("RANK");
  const double mib = 1024.0 * 1024.0;
  std::fprintf(stderr,
               "heap_probe rank %s: peak live heap %.1f MiB, peak footprint %.1f MiB, peak free inside %.1f MiB\n",
               rank ? rank : "-", static_cast<double>(peak_live) / mib, static_cast<double>(peak_footprint) / mib,
               static_cast<double>(peak_free) / mib);
}

}  // namespace
