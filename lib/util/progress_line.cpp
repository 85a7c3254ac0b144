#include "util/progress_line.h"

#include <unistd.h>

namespace xtrain::util {

ProgressLine::ProgressLine(std::FILE* out, double plain_interval_s)
    : out_(out), terminal_(::isatty(::fileno(out)) != 0), interval_s_(terminal_ ? 0.1 : plain_interval_s) {}

bool ProgressLine::due() const {
  if (!shown_) return true;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - last_shown_).count() >= interval_s_;
}

void ProgressLine::update(const std::string& text) {
  if (due()) show(text);
}

void ProgressLine::show(const std::string& text) {
  if (terminal_)
    std::fprintf(out_, "\r%s\033[K", text.c_str());
  else
    std::fprintf(out_, "%s\n", text.c_str());
  std::fflush(out_);
  last_shown_ = std::chrono::steady_clock::now();
  shown_ = true;
}

void ProgressLine::finish(const std::string& text) {
  show(text);
  if (terminal_) {
    std::fputc('\n', out_);
    std::fflush(out_);
  }
}

}  // namespace xtrain::util
