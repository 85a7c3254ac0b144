// ProgressLine: one line of progress on a stream. On a terminal it is rewritten in place
// ("\r" and erase to the end of the line) at most ten times a second; on a file or a pipe (a
// log) it is printed as plain lines, at most one every plain_interval_s seconds, so that logs
// stay short and readable.
#pragma once
#include <chrono>
#include <cstdio>
#include <string>

namespace xtrain::util {

class ProgressLine {
 public:
  explicit ProgressLine(std::FILE* out, double plain_interval_s = 10.0);

  // Whether update() would show a line now: callers can skip formatting it otherwise.
  bool due() const;
  // Shows text if due.
  void update(const std::string& text);
  // Shows text and ends the line.
  void finish(const std::string& text);

 private:
  void show(const std::string& text);

  std::FILE* out_;
  bool terminal_;
  double interval_s_;
  std::chrono::steady_clock::time_point last_shown_;
  bool shown_ = false;
};

}  // namespace xtrain::util
