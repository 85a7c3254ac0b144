#include "launch/goodput.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/input_error.h"

namespace xtrain::launch {
namespace {

namespace fs = std::filesystem;

// One session's steps: when each was recorded, and how long it took.
struct Session {
  double start = 0, end = 0;
  std::map<int64_t, std::pair<double, double>> steps;  // step -> (wall time, step_s)
};

// A protobuf reader for the few fields of tensorboard's Event this needs.
class Fields {
 public:
  explicit Fields(std::string_view bytes) : bytes_(bytes) {}
  // The next field: its number, wire type and payload (varints as a number in `value`).
  bool next(int& field, int& wire, std::string_view& payload, uint64_t& value) {
    if (at_ >= bytes_.size()) return false;
    const uint64_t tag = varint();
    field = static_cast<int>(tag >> 3);
    wire = static_cast<int>(tag & 7);
    if (wire == 0) {
      value = varint();
    } else if (wire == 1 || wire == 5) {
      payload = take(wire == 1 ? 8 : 4);
    } else if (wire == 2) {
      payload = take(varint());
    } else {
      throw std::runtime_error("unexpected wire type");
    }
    return true;
  }

 private:
  uint64_t varint() {
    uint64_t result = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (at_ >= bytes_.size()) throw std::runtime_error("truncated varint");
      const auto byte = static_cast<uint8_t>(bytes_[at_++]);
      result |= uint64_t{byte & 0x7fu} << shift;
      if ((byte & 0x80) == 0) return result;
    }
    throw std::runtime_error("varint too long");
  }
  std::string_view take(uint64_t size) {
    if (size > bytes_.size() - at_) throw std::runtime_error("truncated field");
    const auto out = bytes_.substr(at_, size);
    at_ += size;
    return out;
  }
  std::string_view bytes_;
  size_t at_ = 0;
};

template <typename T>
T fixed(std::string_view payload) {
  T value;
  std::memcpy(&value, payload.data(), sizeof(T));
  return value;
}

// The step_s scalar of a Summary, when it has one.
bool step_seconds(std::string_view summary, double& seconds) {
  Fields values(summary);
  int field, wire;
  std::string_view payload;
  uint64_t number;
  while (values.next(field, wire, payload, number)) {
    if (field != 1 || wire != 2) continue;
    Fields value(payload);
    bool is_step_s = false;
    while (value.next(field, wire, payload, number)) {
      if (field == 1 && wire == 2) is_step_s = payload == "step_s";
      if (field == 2 && wire == 5 && is_step_s) {
        seconds = fixed<float>(payload);
        return true;
      }
    }
  }
  return false;
}

void read_event(std::string_view event, Session& session, bool first) {
  Fields fields(event);
  int field, wire;
  std::string_view payload;
  uint64_t number;
  double wall = 0, seconds = 0;
  int64_t step = 0;
  bool has_step_s = false;
  while (fields.next(field, wire, payload, number)) {
    if (field == 1 && wire == 1) wall = fixed<double>(payload);
    if (field == 2 && wire == 0) step = static_cast<int64_t>(number);
    if (field == 5 && wire == 2) has_step_s = step_seconds(payload, seconds);
  }
  if (first) session.start = wall;
  session.end = std::max(session.end, wall);
  if (has_step_s) session.steps[step] = {wall, seconds};
}

// TFRecords: length, its CRC, the event, its CRC. A torn last record (a killed writer) ends it.
Session read_session(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Session session;
  size_t at = 0;
  bool first = true;
  try {
    while (at + 12 <= bytes.size()) {
      uint64_t length;
      std::memcpy(&length, bytes.data() + at, 8);
      if (length > bytes.size() - at - 16) break;
      read_event(std::string_view(bytes).substr(at + 12, length), session, first);
      first = false;
      at += 16 + length;
    }
  } catch (const std::runtime_error& error) {
    throw InputError(fmt::format("goodput: {}: a damaged event record at byte {}: {}", path.string(), at, error.what()));
  }
  return session;
}

// Each step's last record in metrics.jsonl: the run's final account of its steps.
std::map<int64_t, double> final_step_seconds(const std::string& run_dir) {
  const std::string path = run_dir + "/metrics.jsonl";
  std::ifstream in(path);
  if (!in)
    throw InputError(fmt::format("goodput: cannot read {}: give the run.dir of a run that has trained", path));
  std::map<int64_t, double> steps;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    nlohmann::json record;
    try {
      record = nlohmann::json::parse(line);
    } catch (const std::exception&) {
      throw InputError(fmt::format("goodput: {}:{}: not a JSON record", path, number));
    }
    if (record.contains("step_s") && record.contains("step")) steps[record["step"]] = record["step_s"];
  }
  return steps;
}

std::vector<Session> read_sessions(const std::string& run_dir) {
  const fs::path dir = fs::path(run_dir) / "tensorboard";
  std::vector<fs::path> files;
  std::error_code error;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error))
    if (it->path().filename().string().rfind("events.out.tfevents.", 0) == 0) files.push_back(it->path());
  if (files.empty())
    throw InputError(fmt::format("goodput: no event files in {}: the sessions' wall times come from them; train with "
                                 "metrics.tensorboard: true (the default)",
                                 dir.string()));
  std::sort(files.begin(), files.end());  // named by their start, in microseconds of a fixed width
  std::vector<Session> sessions;
  for (const auto& file : files) sessions.push_back(read_session(file));
  return sessions;
}

}  // namespace

Goodput measure_goodput(const std::string& run_dir) {
  Goodput goodput;
  const auto final_steps = final_step_seconds(run_dir);
  for (const auto& [step, seconds] : final_steps) goodput.productive_s += seconds;
  goodput.steps = static_cast<int64_t>(final_steps.size());
  const auto sessions = read_sessions(run_dir);
  goodput.sessions = static_cast<int>(sessions.size());
  goodput.wall_s = sessions.back().end - sessions.front().start;
  // A session without steps (one that failed while starting) adds to the gap it lies in.
  const Session* before = nullptr;
  for (const auto& session : sessions) {
    if (session.steps.empty()) continue;
    if (before != nullptr) {
      Interruption interruption;
      interruption.last_step = before->steps.rbegin()->first;
      interruption.resumed_from = session.steps.begin()->first - 1;
      // The gap without steps: the last step recorded to the start of the next session's first.
      const double last_wall = before->steps.rbegin()->second.first;
      const auto& [first_wall, first_seconds] = session.steps.begin()->second;
      for (auto it = before->steps.upper_bound(interruption.resumed_from); it != before->steps.end(); ++it)
        interruption.recomputed_s += it->second.second;
      interruption.lost_s = first_wall - first_seconds - last_wall + interruption.recomputed_s;
      goodput.interruptions.push_back(interruption);
    }
    before = &session;
  }
  return goodput;
}

std::string goodput_report(const std::string& run_dir, const Goodput& g) {
  auto share = [&](double seconds) { return g.wall_s > 0 ? 100 * seconds / g.wall_s : 0.0; };
  std::string out = fmt::format("goodput of {}: {} steps in {} sessions, {} interruptions\n", run_dir, g.steps,
                                g.sessions, g.interruptions.size());
  out += fmt::format("  wall time      {:8.2f} s          (the first session's start to the last record)\n", g.wall_s);
  out += fmt::format("  productive     {:8.2f} s {:5.1f} %  (step_s of each step once: the goodput)\n", g.productive_s,
                     share(g.productive_s));
  double lost = 0;
  for (size_t i = 0; i < g.interruptions.size(); ++i) {
    const auto& it = g.interruptions[i];
    lost += it.lost_s;
    // A stop at a checkpoint (a STOP file, a regroup to more nodes) loses no steps.
    const std::string again = it.last_step > it.resumed_from
                                  ? fmt::format("{:.2f} s of steps {}..{} done again", it.recomputed_s,
                                                it.resumed_from + 1, it.last_step)
                                  : "no step done again";
    out += fmt::format(
        "  interruption {:<2}{:8.2f} s {:5.1f} %  (after step {}, resumed from step {}: {:.2f} s without steps "
        "(detection, restart, reload), {})\n",
        i + 1, it.lost_s, share(it.lost_s), it.last_step, it.resumed_from, it.lost_s - it.recomputed_s, again);
  }
  const double other = g.wall_s - g.productive_s - lost;
  out += fmt::format("  other          {:8.2f} s {:5.1f} %  (start-up after the first event, checkpoints, logging)\n",
                     other, share(other));
  return out;
}

}  // namespace xtrain::launch
