#include "train/tensorboard_log.h"

#include <utility>
#include <vector>

namespace xtrain::train {

TensorBoardLog::TensorBoardLog(const std::string& dir, int64_t resume_step, const std::string& recipe_yaml)
    : events_(dir) {
  if (resume_step > 0) events_.restart(resume_step + 1);
  // Four spaces: Markdown's code block, which the text plugin shows as written.
  std::string indented = "    ";
  for (char c : recipe_yaml) indented += c == '\n' ? std::string("\n    ") : std::string(1, c);
  events_.text(resume_step, "recipe", indented);
}

void TensorBoardLog::write(const nlohmann::ordered_json& record) {
  if (!record.contains("step") || !record.at("step").is_number_integer()) return;
  if (record.contains("rollback_to")) {
    events_.restart(record.at("rollback_to").get<int64_t>() + 1);
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
  if (!values.empty()) events_.scalars(record.at("step").get<int64_t>(), values);
}

}  // namespace xtrain::train
