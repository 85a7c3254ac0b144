// Cuts a rank's output stream into lines and puts "[rank R]: " before each, so that the
// output of several ranks, interleaved line by line, stays readable. A partial line waits
// for its end, or for flush() when the rank exits; an endless line is cut every max_line bytes.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

namespace xtrain::launch {

class LinePrefixer {
 public:
  explicit LinePrefixer(std::string prefix, size_t max_line = 1 << 16)
      : prefix_(std::move(prefix)), max_line_(max_line) {}

  // The complete lines among the bytes seen so far, each prefixed and ending in '\n'.
  std::string feed(std::string_view data);
  // The pending partial line, prefixed and ended with '\n'; empty when there is none.
  std::string flush();

 private:
  std::string prefix_;
  size_t max_line_;
  std::string pending_;
};

// "[rank 3]: "
std::string rank_prefix(int rank);

}  // namespace xtrain::launch
