#include "launch/line_prefixer.h"

namespace xtrain::launch {

std::string LinePrefixer::feed(std::string_view data) {
  std::string out;
  while (!data.empty()) {
    const size_t room = max_line_ - pending_.size();
    // The newline itself does not count towards the line's length.
    const size_t newline = data.substr(0, room + 1).find('\n');
    if (newline == std::string_view::npos) {
      if (data.size() <= room) {
        pending_.append(data);
        break;
      }
      pending_.append(data.substr(0, room));
      data.remove_prefix(room);
      out += flush();
      continue;
    }
    out += prefix_;
    out += pending_;
    out.append(data.substr(0, newline + 1));
    pending_.clear();
    data.remove_prefix(newline + 1);
  }
  return out;
}

std::string LinePrefixer::flush() {
  if (pending_.empty()) return {};
  std::string out = prefix_ + pending_ + "\n";
  pending_.clear();
  return out;
}

std::string rank_prefix(int rank) { return "[rank " + std::to_string(rank) + "]: "; }

}  // namespace xtrain::launch
