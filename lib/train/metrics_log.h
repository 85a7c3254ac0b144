// metrics.jsonl: one JSON object per optimizer step (and per evaluation), appended and
// flushed as the run goes, so a crash loses nothing already logged. Doubles are written
// with 17 significant digits, enough to round-trip exactly.
#pragma once
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

namespace xtrain::train {

class MetricsLog {
 public:
  // Opens path for appending. When resuming at step `resume_step`, records of later steps
  // (written after that checkpoint by a run that then died) are dropped first; a fresh run
  // (resume_step 0) starts an empty file.
  MetricsLog(const std::string& path, int64_t resume_step);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  void write(const nlohmann::ordered_json& record);

 private:
  std::FILE* file_ = nullptr;
};

// Renders a JSON object with exact (round-trip) floating-point numbers.
std::string to_json_line(const nlohmann::ordered_json& record);

}  // namespace xtrain::train
