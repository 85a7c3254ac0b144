#include "launch/data_positions.h"

#include <fstream>
#include <map>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/input_error.h"

namespace xtrain::launch {
namespace {

struct StepData {
  int64_t position = 0, samples = 0;
  int line = 0;
};

// What the file says, in its order: each step's last record, and the rollbacks' skips.
struct Records {
  std::map<int64_t, StepData> steps;
  std::map<int64_t, std::pair<int64_t, int64_t>> skips;  // first step after a rollback -> [from, to)
};

void add_step(const nlohmann::json& record, int line, Records& records, DataPositions& out) {
  const int64_t step = record.at("step");
  const StepData data{record.at("data.position"), record.value("data.samples", int64_t{0}), line};
  auto [it, fresh] = records.steps.try_emplace(step, data);
  if (fresh) return;
  // A resume drops the records after its checkpoint before appending, so a second record of a
  // step means the step ran twice into one history.
  out.faults.push_back(fmt::format(
      "step {} is recorded twice (lines {} and {}) with no resume or rollback between: samples {}..{}, then {}..{}",
      step, it->second.line, line, it->second.position, it->second.position + it->second.samples - 1, data.position,
      data.position + data.samples - 1));
  it->second = data;
}

Records read_records(const std::string& path, DataPositions& out) {
  std::ifstream in(path);
  if (!in) throw InputError(fmt::format("goodput: cannot read {}: give the run.dir of a run that has trained", path));
  Records records;
  std::string text;
  for (int line = 1; std::getline(in, text); ++line) {
    if (text.empty()) continue;
    nlohmann::json record;
    try {
      record = nlohmann::json::parse(text);
      if (record.contains("rollback_to")) {
        const int64_t to = record.at("rollback_to");
        records.steps.erase(records.steps.upper_bound(to), records.steps.end());
        const auto& skipped = record.at("skipped_samples");
        records.skips[to + 1] = {skipped.at(0), skipped.at(1)};
        out.rollback_skips += skipped.at(1).get<int64_t>() - skipped.at(0).get<int64_t>();
      } else if (record.contains("step") && record.contains("data.position")) {
        add_step(record, line, records, out);
      }
    } catch (const std::exception&) {
      throw InputError(fmt::format("goodput: {}:{}: not a JSON record of a step", path, line));
    }
  }
  return records;
}

// Each step against the one before it: the uninterrupted sequence starts at step 1, sample 0.
void check_sequence(const Records& records, DataPositions& out) {
  int64_t expected_step = 1, expected_position = 0;
  for (const auto& [step, data] : records.steps) {
    const auto skip = records.skips.find(step);
    if (step != expected_step) {
      out.faults.push_back(fmt::format("steps {}..{} have no record", expected_step, step - 1));
    } else if (skip != records.skips.end() && skip->second == std::make_pair(expected_position, data.position)) {
      // A rollback's skip, as its record names it.
    } else if (data.position > expected_position) {
      out.faults.push_back(fmt::format("step {} read samples {}..{}: samples {}..{} after step {}'s batch were skipped",
                                       step, data.position, data.position + data.samples - 1, expected_position,
                                       data.position - 1, step - 1));
    } else if (data.position < expected_position) {
      out.faults.push_back(fmt::format(
          "step {} read samples {}..{}: samples {}..{} were read again (step {}'s batch ended at sample {})", step,
          data.position, data.position + data.samples - 1, data.position,
          std::min(expected_position, data.position + data.samples) - 1, step - 1, expected_position - 1));
    }
    expected_step = step + 1;
    expected_position = data.position + data.samples;
  }
  out.steps = static_cast<int64_t>(records.steps.size());
  out.last_step = records.steps.empty() ? 0 : records.steps.rbegin()->first;
  out.end_position = expected_position;
}

}  // namespace

DataPositions check_data_positions(const std::string& run_dir) {
  DataPositions out;
  check_sequence(read_records(run_dir + "/metrics.jsonl", out), out);
  return out;
}

std::string data_positions_report(const DataPositions& p) {
  if (p.steps == 0 && p.faults.empty())
    return "data: no data positions in metrics.jsonl (a run from before steps recorded data.position)\n";
  if (p.faults.empty())
    return fmt::format("data: steps 1..{} read samples 0..{} in order, each global batch once: none skipped or "
                       "repeated{}\n",
                       p.last_step, p.end_position - 1,
                       p.rollback_skips > 0 ? fmt::format(" ({} skipped on purpose by rollbacks)", p.rollback_skips)
                                            : "");
  std::string out = fmt::format("data: {} fault{} in the data positions of steps 1..{}:\n", p.faults.size(),
                                p.faults.size() == 1 ? "" : "s", p.last_step);
  for (const auto& fault : p.faults) out += "  " + fault + "\n";
  return out;
}

}  // namespace xtrain::launch
