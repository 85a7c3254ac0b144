// Published training throughputs as the planner's yardstick: a YAML file of runs (a model shape
// as a recipe plus --set overrides, a cluster, a hardware profile, how the engine that ran it
// overlaps its communication, the published figure, its unit and its source), each planned and
// compared with what was published. Rows marked `calibration` are those the hardware profile's
// efficiencies were fitted on; the others test the model. Format: tests/data/plan/published.yaml.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "config/recipe.h"
#include "plan/model_census.h"
#include "plan/step_time_estimate.h"

namespace xtrain::plan {

enum class PublishedUnit { tflops_per_device, tokens_per_second_per_device };

struct PublishedRun {
  std::string name;
  std::string recipe;               // path, relative to the runs' file
  std::vector<std::string> overrides;  // --set KEY=VALUE
  int64_t nodes = 1, gpus_per_node = 8;
  std::string hardware;
  CommunicationOverlap overlap;
  // pipeline_split: ends_as_layers (xtrain's and torchtitan's cut, the default) or even_layers
  // (Megatron's: the layers split evenly, the embedding and the head beside them).
  bool ends_as_layers = true;
  double published = 0;
  PublishedUnit unit = PublishedUnit::tflops_per_device;
  bool calibration = false;
  // The error this run may show when it cannot reach the command's --max-error, and why (0: none).
  double tolerance = 0;
  std::string tolerance_reason;
  std::string source;
  // The publication or team the figure comes from; runs of one source are held out together.
  std::string source_id;
  // The attention kernel the engine ran (a table of the hardware profile's attention_kernels:
  // cudnn for Megatron's Transformer Engine), where it is not the profile's own.
  std::string attention_kernel;
  // The FP8 linear layers the engine ran (a table of the hardware profile's fp8_linear_speedups:
  // torchao for torchtitan's Float8Linear); empty: the profile's FP8 GEMM rates and casts.
  std::string fp8_linear;
  // The memory a device held, GiB, where the source publishes it (0: not published).
  double published_memory_gib = 0;
};

struct PublishedRuns {
  std::string file, date;
  std::vector<PublishedRun> runs;
};

struct PublishedCheck {
  PublishedRun run;
  double predicted = 0;
  double predicted_memory_gib = 0;  // the plan's total for the fullest rank
  double error() const { return (predicted - run.published) / run.published; }
  double memory_error() const { return (predicted_memory_gib - run.published_memory_gib) / run.published_memory_gib; }
};

// Throws InputError naming the file, the row and the field.
PublishedRuns load_published_runs(const std::string& file);

// A recipe's census (train::model_census: the model built without storage).
using CensusOf = std::function<ModelCensus(const config::Recipe&)>;

// The run's recipe with its overrides.
config::Recipe recipe_of(const PublishedRuns& runs, const PublishedRun& run);

// The run planned: its recipe loaded with its overrides, its step time on its cluster, in the
// published figure's unit (TFLOP/s per device as Megatron counts them, or tokens/s per device).
PublishedCheck check_published_run(const PublishedRuns& runs, const PublishedRun& run, const CensusOf& census_of);

// Prints every run's predicted and published figure and their error, then the planned memory
// against the published where a run gives it; returns how many runs that are not calibration
// rows miss by more than `max_error` (a fraction), or than their own tolerance where they state
// one (memory is printed, not counted).
int64_t print_published_checks(const PublishedRuns& runs, const std::vector<PublishedCheck>& checks, double max_error);

// The fitted efficiencies of the hardware profiles (at most three; 0: the profile's own):
// large dense GEMMs' fraction of peak, the experts' grouped GEMMs' at large tokens an expert, and
// the links' fraction of their bandwidth that collectives reach.
struct FittedEfficiencies {
  double gemm = 0, expert = 0, link = 0;
};

// A run with what planning it needs, built once so that a fit can plan it many times.
struct PlannedRun {
  PublishedRun run;
  config::Recipe recipe;
  ModelCensus census;
  HardwareProfile hardware;
  double flops_per_token = 0;
};
std::vector<PlannedRun> plan_published_runs(const PublishedRuns& runs, const CensusOf& census_of);
PublishedCheck check_planned_run(const PlannedRun& planned, const FittedEfficiencies& fitted = {});

// The efficiencies that minimise the sum of squared log errors over the runs `fit_on` chooses,
// every profile taking the same three (an efficiency no chosen run depends on keeps its value).
FittedEfficiencies fit_efficiencies(const std::vector<PlannedRun>& planned,
                                    const std::function<bool(const PublishedRun&)>& fit_on);

// Leave one source out: for `source_id` (or every source where it is "all") the efficiencies
// fitted on the runs of every other source and the held-out runs' errors under them; returns how
// many held-out runs miss by more than `max_error`.
int64_t print_holdout(const PublishedRuns& runs, const std::vector<PlannedRun>& planned, const std::string& source_id,
                      double max_error);
// The fit on the calibration rows, printed beside the profiles' values.
void print_calibration_fit(const std::vector<PlannedRun>& planned);

}  // namespace xtrain::plan
