#include "util/file_digest.h"

#include <memory>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <fmt/format.h>

#include "util/posix_file.h"

namespace xtrain::util {
namespace {

std::string hex(uint64_t digest) { return fmt::format("{:016x}", digest); }

struct StateFree {
  void operator()(XXH3_state_t* state) const { XXH3_freeState(state); }
};

}  // namespace

std::string xxh3_hex(const void* data, size_t size) { return hex(XXH3_64bits(data, size)); }

std::string file_xxh3(const std::string& path, uint64_t* bytes) {
  InputFile file(path);
  std::unique_ptr<XXH3_state_t, StateFree> state(XXH3_createState());
  XXH3_64bits_reset(state.get());
  std::vector<char> block(1 << 20);
  uint64_t total = 0;
  while (const size_t n = file.read(block.data(), block.size())) {
    XXH3_64bits_update(state.get(), block.data(), n);
    total += n;
  }
  if (bytes) *bytes = total;
  return hex(XXH3_64bits_digest(state.get()));
}

}  // namespace xtrain::util
