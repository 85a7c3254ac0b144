#include "plan/published_runs.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "config/recipe_loader.h"
#include "plan/cluster_layout.h"
#include "plan/hardware_profile.h"
#include "util/input_error.h"

namespace xtrain::plan {
namespace {

template <class T>
T field(const YAML::Node& row, const std::string& where, const char* key) {
  if (!row[key]) throw InputError(fmt::format("{}: no '{}'", where, key));
  try {
    return row[key].as<T>();
  } catch (const YAML::Exception&) {
    throw InputError(fmt::format("{}:{}: '{}' has the wrong type", where, row[key].Mark().line + 1, key));
  }
}

CommunicationOverlap overlap_of(const YAML::Node& row, const std::string& where) {
  CommunicationOverlap overlap;
  if (!row["overlap"]) return overlap;
  for (const auto& item : row["overlap"]) {
    const auto name = item.as<std::string>();
    if (name == "tp_behind_gemms") overlap.tp_behind_gemms = true;
    else if (name == "distributed_optimizer") overlap.distributed_optimizer = true;
    else if (name == "fsdp_once_per_step") overlap.fsdp_once_per_step = true;
    else
      throw InputError(fmt::format("{}: overlap '{}' is none of tp_behind_gemms, distributed_optimizer, "
                                   "fsdp_once_per_step", where, name));
  }
  return overlap;
}

PublishedUnit unit_of(const std::string& unit, const std::string& where) {
  if (unit == "tflops_per_device") return PublishedUnit::tflops_per_device;
  if (unit == "tokens_per_second_per_device") return PublishedUnit::tokens_per_second_per_device;
  throw InputError(fmt::format("{}: unit '{}' is neither tflops_per_device nor tokens_per_second_per_device", where, unit));
}

// The model FLOPs of one token, as Megatron counts them: 6 a matrix parameter a token passes
// through (the output projection included, the embedding lookup not) and the full attention
// square, forward and backward, no recompute.
double model_flops_per_token(const ModelCensus& c, double seq) {
  double matrices = static_cast<double>(c.head > 0 ? c.head : c.embedding);
  for (const auto& layer : c.layers)
    matrices += static_cast<double>(layer.attention + layer.dense + layer.active_experts);
  const double attention = 6 * seq * static_cast<double>(c.query_width + c.value_width) *
                           static_cast<double>(c.layers.size());
  return 6 * matrices + attention;
}

}  // namespace

PublishedRuns load_published_runs(const std::string& file) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(file);
  } catch (const YAML::Exception& e) {
    throw InputError(fmt::format("{}: {}", file, e.what()));
  }
  PublishedRuns runs;
  runs.file = file;
  runs.date = root["date"] ? root["date"].as<std::string>() : "";
  if (!root["runs"] || !root["runs"].IsSequence()) throw InputError(fmt::format("{}: no 'runs' list", file));
  for (const auto& row : root["runs"]) {
    const std::string where = fmt::format("{}:{}", file, row.Mark().line + 1);
    PublishedRun run;
    run.name = field<std::string>(row, where, "name");
    run.recipe = field<std::string>(row, where, "recipe");
    if (row["set"])
      for (const auto& item : row["set"]) run.overrides.push_back(item.as<std::string>());
    run.nodes = field<int64_t>(row, where, "nodes");
    run.gpus_per_node = field<int64_t>(row, where, "gpus_per_node");
    run.hardware = field<std::string>(row, where, "hardware");
    run.overlap = overlap_of(row, where);
    if (row["pipeline_split"]) {
      const auto split = field<std::string>(row, where, "pipeline_split");
      if (split != "ends_as_layers" && split != "even_layers")
        throw InputError(fmt::format("{}: pipeline_split '{}' is neither ends_as_layers nor even_layers", where, split));
      run.ends_as_layers = split == "ends_as_layers";
    }
    run.published = field<double>(row, where, "published");
    run.unit = unit_of(field<std::string>(row, where, "unit"), where);
    run.calibration = row["calibration"] && row["calibration"].as<bool>();
    run.source = field<std::string>(row, where, "source");
    if (row["tolerance_percent"]) {
      run.tolerance = field<double>(row, where, "tolerance_percent") / 100;
      run.tolerance_reason = field<std::string>(row, where, "tolerance_reason");
    }
    if (run.published <= 0) throw InputError(fmt::format("{}: 'published' must be above 0", where));
    runs.runs.push_back(run);
  }
  return runs;
}

config::Recipe recipe_of(const PublishedRuns& runs, const PublishedRun& run) {
  const auto folder = std::filesystem::path(runs.file).parent_path();
  config::LoadOptions options;
  options.overrides = run.overrides;
  options.check_files = false;
  try {
    return config::load_recipe((folder / run.recipe).string(), options);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: run {}: {}", runs.file, run.name, e.what()));
  }
}

PublishedCheck check_published_run(const PublishedRuns& runs, const PublishedRun& run, const CensusOf& census_of) {
  const auto recipe = recipe_of(runs, run);
  const auto census = census_of(recipe);
  auto layout = layout_of(recipe, run.nodes, run.gpus_per_node);
  layout.ends_as_layers = run.ends_as_layers;
  const auto time = estimate_step_time(census, recipe, layout, load_hardware_profile(run.hardware), run.overlap);
  PublishedCheck check{run, 0};
  if (run.unit == PublishedUnit::tokens_per_second_per_device) {
    check.predicted = time.tokens_per_second_per_device();
  } else {
    const double flops = time.tokens_per_step * model_flops_per_token(census, static_cast<double>(recipe.data.seq_len));
    check.predicted = flops / time.seconds() / static_cast<double>(layout.world()) / 1e12;
  }
  return check;
}

int64_t print_published_checks(const PublishedRuns& runs, const std::vector<PublishedCheck>& checks, double max_error) {
  fmt::print("plan against published runs: {}{}\n", runs.file, runs.date.empty() ? "" : fmt::format(" ({})", runs.date));
  fmt::print("  {:<38} {:>10} {:>10}  {:<13} {:>7}  {}\n", "run", "predicted", "published", "unit", "error", "");
  int64_t misses = 0;
  for (const auto& c : checks) {
    const double allowed = c.run.tolerance > 0 ? c.run.tolerance : max_error;
    const bool miss = !c.run.calibration && std::abs(c.error()) > allowed;
    misses += miss ? 1 : 0;
    std::string mark = c.run.calibration ? "calibration" : "";
    if (!c.run.calibration && std::abs(c.error()) > max_error)
      mark = c.run.tolerance > 0 ? fmt::format("beyond {:.0f}% (allowed {:.0f}%: {})", 100 * max_error,
                                               100 * c.run.tolerance, c.run.tolerance_reason)
                                 : fmt::format("beyond {:.0f}%", 100 * max_error);
    fmt::print("  {:<38} {:>10.1f} {:>10.1f}  {:<13} {:>+6.1f}%  {}\n", c.run.name, c.predicted, c.run.published,
               c.run.unit == PublishedUnit::tflops_per_device ? "TFLOP/s/GPU" : "tokens/s/GPU", 100 * c.error(), mark);
  }
  const auto tested = std::count_if(checks.begin(), checks.end(), [](const PublishedCheck& c) { return !c.run.calibration; });
  const auto within = std::count_if(checks.begin(), checks.end(), [&](const PublishedCheck& c) {
    return !c.run.calibration && std::abs(c.error()) <= max_error;
  });
  fmt::print("{} of the {} runs that are not calibration rows lie within {:.0f}%\n", within, tested, 100 * max_error);
  return misses;
}

}  // namespace xtrain::plan
