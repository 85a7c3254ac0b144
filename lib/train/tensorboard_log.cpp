#include "train/tensorboard_log.h"

#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "util/input_error.h"

namespace xtrain::train {

namespace fs = std::filesystem;

void TensorBoardLog::check_folder(const std::string& dir) {
  std::error_code error;
  const auto status = fs::symlink_status(dir, error);
  if (fs::is_symlink(status))
    throw InputError(fmt::format("{} is a symbolic link (to {}); a run writes only into a real folder: remove the "
                                 "link (the run makes the folder itself), or set metrics.tensorboard: false",
                                 dir, fs::read_symlink(dir, error).string()));
  if (fs::exists(status) && !fs::is_directory(status))
    throw InputError(fmt::format("{} is a file, where the run writes its TensorBoard event files: move it away, "
                                 "or set metrics.tensorboard: false",
                                 dir));
  fs::create_directories(dir, error);
  if (error) throw std::runtime_error(fmt::format("cannot create {}: {}", dir, error.message()));
}

namespace {
void warn_unwritten(const std::exception& error, const std::string& dir) {
  fmt::print(stderr,
             "warning: TensorBoard: {}; the run goes on without TensorBoard scalars from here (metrics.jsonl has "
             "every figure): free space in {}, or set metrics.tensorboard: false\n",
             error.what(), dir);
  std::fflush(stderr);
}
}  // namespace

template <typename Write>
void TensorBoardLog::attempt(const Write& write) {
  if (!events_) return;
  try {
    write(*events_);
  } catch (const InputError&) {
    throw;
  } catch (const std::runtime_error& e) {
    warn_unwritten(e, dir_);
    events_.reset();
  }
}

TensorBoardLog::TensorBoardLog(const std::string& dir, int64_t resume_step, const std::string& recipe_yaml)
    : dir_(dir) {
  check_folder(dir);
  try {
    events_.emplace(dir);
  } catch (const InputError&) {
    throw;
  } catch (const std::runtime_error& e) {
    warn_unwritten(e, dir_);
    return;
  }
  // Four spaces: Markdown's code block, which the text plugin shows as written.
  std::string indented = "    ";
  for (char c : recipe_yaml) indented += c == '\n' ? std::string("\n    ") : std::string(1, c);
  attempt([&](EventFile& events) {
    if (resume_step > 0) events.restart(resume_step + 1);
    events.text(resume_step, "recipe", indented);
  });
}

void TensorBoardLog::write(const nlohmann::ordered_json& record) {
  if (!record.contains("step") || !record.at("step").is_number_integer()) return;
  if (record.contains("rollback_to")) {
    attempt([&](EventFile& events) { events.restart(record.at("rollback_to").get<int64_t>() + 1); });
    return;
  }
  std::vector<std::pair<std::string, double>> values;
  for (const auto& [key, value] : record.items()) {
    if (key == "step") continue;
    if (value.is_number()) values.emplace_back(key, value.get<double>());
    if (value.is_array())
      for (size_t i = 0; i < value.size(); ++i)
        if (value[i].is_number()) values.emplace_back(key + "/" + std::to_string(i), value[i].get<double>());
  }
  if (!values.empty()) attempt([&](EventFile& events) { events.scalars(record.at("step").get<int64_t>(), values); });
}

}  // namespace xtrain::train
