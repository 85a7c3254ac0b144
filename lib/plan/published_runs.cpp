#include "plan/published_runs.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "config/recipe_loader.h"
#include "plan/cluster_layout.h"
#include "plan/hardware_profile.h"
#include "plan/memory_estimate.h"
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

// A row's key that names one framework's way of doing something (the only one the planner knows
// for that key): whether the row gives it.
bool names_behaviour(const YAML::Node& row, const std::string& where, const char* key, const std::string& value,
                     const char* meaning) {
  if (!row[key]) return false;
  const auto given = field<std::string>(row, where, key);
  if (given != value) throw InputError(fmt::format("{}: {} '{}' is not {} ({})", where, key, given, value, meaning));
  return true;
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
    run.overlap.selective_every_second_matmul = names_behaviour(
        row, where, "recompute_policy", "every_second_matmul", "torchtitan's per-op selective recompute");
    run.overlap.torch_loss_parallel = names_behaviour(row, where, "loss_kernel", "torch_loss_parallel",
                                                      "DTensor's vocabulary-parallel cross-entropy");
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
    run.source_id = row["source_id"] ? field<std::string>(row, where, "source_id") : run.source;
    if (row["attention_kernel"]) run.attention_kernel = field<std::string>(row, where, "attention_kernel");
    if (row["fp8_linear"]) run.fp8_linear = field<std::string>(row, where, "fp8_linear");
    if (row["published_memory_gib"]) run.published_memory_gib = field<double>(row, where, "published_memory_gib");
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

namespace {

PlannedRun planned_run(const PublishedRuns& runs, const PublishedRun& run, const CensusOf& census_of) {
  PlannedRun planned{run, recipe_of(runs, run), {}, load_hardware_profile(run.hardware), 0};
  planned.census = census_of(planned.recipe);
  planned.flops_per_token = model_flops_per_token(planned.census, static_cast<double>(planned.recipe.data.seq_len));
  if (!run.attention_kernel.empty()) {
    if (!planned.hardware.attention_kernels.count(run.attention_kernel))
      throw InputError(fmt::format("{}: run {}: attention_kernel '{}' is no table of hardware profile {}", runs.file, run.name,
                                   run.attention_kernel, run.hardware));
    planned.hardware.attention_kernel = run.attention_kernel;
  }
  if (!run.fp8_linear.empty()) {
    if (!planned.hardware.fp8_linear_speedups.count(run.fp8_linear))
      throw InputError(fmt::format("{}: run {}: fp8_linear '{}' is no table of hardware profile {}'s fp8_linear_speedups",
                                   runs.file, run.name, run.fp8_linear, run.hardware));
    planned.hardware.fp8_linear = run.fp8_linear;
  }
  return planned;
}

}  // namespace

std::vector<PlannedRun> plan_published_runs(const PublishedRuns& runs, const CensusOf& census_of) {
  std::vector<PlannedRun> planned;
  for (const auto& run : runs.runs) planned.push_back(planned_run(runs, run, census_of));
  return planned;
}

PublishedCheck check_planned_run(const PlannedRun& planned, const FittedEfficiencies& fitted) {
  const auto& run = planned.run;
  auto hardware = planned.hardware;
  if (fitted.gemm > 0) hardware.gemm_efficiency = fitted.gemm;
  if (fitted.expert > 0) hardware.expert_efficiency = fitted.expert;
  if (fitted.link > 0) hardware.link_efficiency = fitted.link;
  auto layout = layout_of(planned.recipe, run.nodes, run.gpus_per_node);
  layout.ends_as_layers = run.ends_as_layers;
  const auto time = estimate_step_time(planned.census, planned.recipe, layout, hardware, run.overlap);
  PublishedCheck check{run, 0, 0};
  if (run.published_memory_gib > 0)
    check.predicted_memory_gib = estimate_memory(planned.census, planned.recipe, layout, hardware, run.overlap).total() / kGiB;
  if (run.unit == PublishedUnit::tokens_per_second_per_device) {
    check.predicted = time.tokens_per_second_per_device();
  } else {
    check.predicted = time.tokens_per_step * planned.flops_per_token / time.seconds() /
                      static_cast<double>(layout.world()) / 1e12;
  }
  return check;
}

PublishedCheck check_published_run(const PublishedRuns& runs, const PublishedRun& run, const CensusOf& census_of) {
  return check_planned_run(planned_run(runs, run, census_of));
}

namespace {

double squared_log_error(const std::vector<PlannedRun>& planned, const std::vector<size_t>& rows,
                         const FittedEfficiencies& fitted) {
  double sum = 0;
  for (const size_t row : rows) {
    const auto check = check_planned_run(planned[row], fitted);
    const double e = std::log(check.predicted / check.run.published);
    sum += e * e;
  }
  return sum;
}

}  // namespace

FittedEfficiencies fit_efficiencies(const std::vector<PlannedRun>& planned,
                                    const std::function<bool(const PublishedRun&)>& fit_on) {
  std::vector<size_t> rows;
  for (size_t i = 0; i < planned.size(); ++i)
    if (fit_on(planned[i].run)) rows.push_back(i);
  FittedEfficiencies fitted;
  if (rows.empty()) return fitted;
  // Start from the first chosen run's profile; each efficiency in turn by golden-section search of
  // its logarithm over [0.05, 1], the others held, until a round moves none by 0.1%.
  const auto& start = planned[rows.front()].hardware;
  fitted = {start.gemm_efficiency, start.expert_efficiency, start.link_efficiency};
  double* parameters[] = {&fitted.gemm, &fitted.expert, &fitted.link};
  const double golden = (std::sqrt(5.0) - 1) / 2;
  for (int round = 0; round < 40; ++round) {
    double moved = 0;
    for (double* p : parameters) {
      const double kept = *p;
      const auto cost = [&](double log_value) {
        *p = std::exp(log_value);
        return squared_log_error(planned, rows, fitted);
      };
      double low = std::log(0.05), high = 0;
      if (std::abs(cost(low) - cost(high)) < 1e-12) {  // no chosen run depends on it
        *p = kept;
        continue;
      }
      double a = high - golden * (high - low), b = low + golden * (high - low);
      double fa = cost(a), fb = cost(b);
      for (int step = 0; step < 60 && high - low > 1e-5; ++step) {
        if (fa < fb) {
          high = b, b = a, fb = fa, a = high - golden * (high - low), fa = cost(a);
        } else {
          low = a, a = b, fa = fb, b = low + golden * (high - low), fb = cost(b);
        }
      }
      *p = std::exp((low + high) / 2);
      moved = std::max(moved, std::abs(std::log(*p / kept)));
    }
    if (moved < 1e-3) break;
  }
  return fitted;
}

namespace {

std::string describe_fit(const FittedEfficiencies& f) {
  return fmt::format("gemm_efficiency {:.3f}, expert_efficiency {:.3f}, link_efficiency {:.3f}", f.gemm, f.expert, f.link);
}

}  // namespace

void print_calibration_fit(const std::vector<PlannedRun>& planned) {
  const auto fitted = fit_efficiencies(planned, [](const PublishedRun& run) { return run.calibration; });
  fmt::print("fitted on the calibration rows (least squares of the log error): {}\n", describe_fit(fitted));
  for (const auto& p : planned) {
    if (!p.run.calibration) continue;
    const auto check = check_planned_run(p, fitted);
    fmt::print("  {:<44} {:>10.1f} {:>10.1f} {:>+7.1f}%  profile {}: {}\n", p.run.name, check.predicted, p.run.published,
               100 * check.error(), p.hardware.name,
               describe_fit({p.hardware.gemm_efficiency, p.hardware.expert_efficiency, p.hardware.link_efficiency}));
  }
}

int64_t print_holdout(const PublishedRuns& runs, const std::vector<PlannedRun>& planned, const std::string& source_id,
                      double max_error) {
  std::vector<std::string> sources;
  for (const auto& run : runs.runs)
    if (std::find(sources.begin(), sources.end(), run.source_id) == sources.end() &&
        (source_id == "all" || run.source_id == source_id))
      sources.push_back(run.source_id);
  if (sources.empty()) {
    std::string known;
    for (const auto& run : runs.runs)
      if (known.find(run.source_id) == std::string::npos) known += (known.empty() ? "" : ", ") + run.source_id;
    throw InputError(fmt::format("--holdout-source {}: {} has no such source_id; its sources are {} (or all)", source_id,
                                 runs.file, known));
  }
  fmt::print("leave one source out: {}{}\n", runs.file, runs.date.empty() ? "" : fmt::format(" ({})", runs.date));
  int64_t misses = 0, held = 0;
  for (const auto& source : sources) {
    const auto fitted = fit_efficiencies(planned, [&](const PublishedRun& run) { return run.source_id != source; });
    fmt::print("held out {}: fitted on the other sources' runs: {}\n", source, describe_fit(fitted));
    for (const auto& p : planned) {
      if (p.run.source_id != source) continue;
      const auto check = check_planned_run(p, fitted);
      const bool miss = std::abs(check.error()) > max_error;
      misses += miss ? 1 : 0;
      ++held;
      fmt::print("  {:<44} {:>10.1f} {:>10.1f}  {:<13} {:>+6.1f}%  {}\n", p.run.name, check.predicted, p.run.published,
                 p.run.unit == PublishedUnit::tflops_per_device ? "TFLOP/s/GPU" : "tokens/s/GPU", 100 * check.error(),
                 miss ? fmt::format("beyond {:.0f}%", 100 * max_error) : "");
    }
  }
  fmt::print("{} of the {} held-out runs lie within {:.0f}%\n", held - misses, held, 100 * max_error);
  return misses;
}

int64_t print_published_checks(const PublishedRuns& runs, const std::vector<PublishedCheck>& checks, double max_error) {
  fmt::print("plan against published runs: {}{}\n", runs.file, runs.date.empty() ? "" : fmt::format(" ({})", runs.date));
  fmt::print("  {:<44} {:>10} {:>10}  {:<13} {:>7}  {}\n", "run", "predicted", "published", "unit", "error", "");
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
    fmt::print("  {:<44} {:>10.1f} {:>10.1f}  {:<13} {:>+6.1f}%  {}\n", c.run.name, c.predicted, c.run.published,
               c.run.unit == PublishedUnit::tflops_per_device ? "TFLOP/s/GPU" : "tokens/s/GPU", 100 * c.error(), mark);
  }
  const auto tested = std::count_if(checks.begin(), checks.end(), [](const PublishedCheck& c) { return !c.run.calibration; });
  const auto within = std::count_if(checks.begin(), checks.end(), [&](const PublishedCheck& c) {
    return !c.run.calibration && std::abs(c.error()) <= max_error;
  });
  fmt::print("{} of the {} runs that are not calibration rows lie within {:.0f}%\n", within, tested, 100 * max_error);
  bool memory_header = false;
  for (const auto& c : checks) {
    if (c.run.published_memory_gib <= 0) continue;
    if (!memory_header) fmt::print("memory per device against the published:\n  {:<44} {:>10} {:>10}  {:>7}\n", "run", "planned GiB", "published", "error");
    memory_header = true;
    fmt::print("  {:<44} {:>10.1f} {:>10.1f}  {:>+6.1f}%\n", c.run.name, c.predicted_memory_gib, c.run.published_memory_gib,
               100 * c.memory_error());
  }
  return misses;
}

}  // namespace xtrain::plan
