#include "train/metrics_log.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "util/posix_file.h"

namespace xtrain::train {

std::string to_json_line(const nlohmann::ordered_json& record) {
  std::string line = "{";
  bool first = true;
  for (const auto& [key, value] : record.items()) {
    line += fmt::format("{}{}:", first ? "" : ",", nlohmann::json(key).dump());
    first = false;
    if (value.is_number_float()) {
      // JSON has no inf or NaN (a skipped step has no gradient norm): those become null.
      const double number = value.get<double>();
      line += std::isfinite(number) ? fmt::format("{:.17g}", number) : std::string("null");
    } else {
      line += value.dump();
    }
  }
  return line + "}";
}

MetricsLog::MetricsLog(const std::string& path, int64_t resume_step) {
  std::vector<std::string> kept;
  if (resume_step > 0) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
      try {
        auto record = nlohmann::json::parse(line);
        if (record.value("step", int64_t{0}) <= resume_step) kept.push_back(line);
      } catch (const nlohmann::json::exception&) {
        // A torn last line from a killed writer.
      }
    }
  }
  // Never through a link: metrics.jsonl planted as a link to another file would truncate that file.
  const int fd = util::OutputFile::create(path).release();
  file_ = ::fdopen(fd, "w");
  if (!file_) {
    ::close(fd);
    throw std::runtime_error(fmt::format("cannot write {}", path));
  }
  for (const auto& line : kept) std::fprintf(file_, "%s\n", line.c_str());
  std::fflush(file_);
}

MetricsLog::~MetricsLog() {
  if (file_) std::fclose(file_);
}

void MetricsLog::write(const nlohmann::ordered_json& record) {
  std::fprintf(file_, "%s\n", to_json_line(record).c_str());
  std::fflush(file_);
}

}  // namespace xtrain::train
