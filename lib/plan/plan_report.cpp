#include "plan/plan_report.h"

#include <algorithm>

#include <fmt/format.h>

#include "plan/cluster_layout.h"
#include "plan/hardware_profile.h"
#include "plan/layout_search.h"
#include "plan/memory_estimate.h"
#include "plan/step_time_estimate.h"

namespace xtrain::plan {
namespace {

std::string count(double n) {
  if (n >= 1e12) return fmt::format("{:.2f}T", n / 1e12);
  if (n >= 1e9) return fmt::format("{:.1f}B", n / 1e9);
  return fmt::format("{:.1f}M", n / 1e6);
}

void print_memory(const MemoryEstimate& memory, const HardwareProfile& hw) {
  if (memory.pipeline_ranks > 1)
    fmt::print("\nmemory per rank (pipeline rank {} of 0-{}, the fullest)\n", memory.pipeline_rank,
               memory.pipeline_ranks - 1);
  else
    fmt::print("\nmemory per rank\n");
  fmt::print("  {:<30} {:>10}  {}\n", "term", "GiB", "counted as");
  for (const auto& term : memory.terms)
    fmt::print("  {:<30} {:>10.3f}  {}\n", term.name, term.bytes / kGiB, term.detail);
  fmt::print("  {:<30} {:>10.3f}  of {:.1f} GiB on a {} ({:.0f}%)\n", "total", memory.total() / kGiB, hw.memory_gib,
             hw.name, 100 * memory.total() / (hw.memory_gib * kGiB));
}

void print_time(const StepTimeEstimate& time) {
  fmt::print("\nstep time per rank\n");
  fmt::print("  {:<30} {:>10}  {}\n", "term", "seconds", "");
  for (const auto& term : time.terms) fmt::print("  {:<30} {:>10.4f}  {}\n", term.name, term.seconds, term.detail);
  fmt::print("  {:<30} {:>10.4f}  MFU {:.1f}%, {:.0f} tokens/s per device\n", "step", time.seconds(),
             100 * time.mfu(), time.tokens_per_second_per_device());
}

void print_does_not_fit(const MemoryEstimate& memory, const HardwareProfile& hw) {
  const auto& largest = memory.largest();
  fmt::print("\ndoes not fit: {:.2f} GiB over the {:.1f} GiB of a {} ({:.2f} GiB needed). The largest term is {} "
             "({:.2f} GiB); to shrink it: {}. `xtrain plan --search` lists layouts that fit.\n",
             (memory.total() - hw.memory_gib * kGiB) / kGiB, hw.memory_gib, hw.name, memory.total() / kGiB,
             largest.name, largest.bytes / kGiB, largest.shrink);
}

std::string options_of(const LayoutCandidate& c) {
  const auto& p = c.recipe.parallel;
  return fmt::format("--set parallel.tp={} --set parallel.pp={} --set parallel.cp={} --set parallel.ep={} --set "
                     "parallel.dp={} --set parallel.fsdp={} --set memory.recompute={} --set train.micro_batch_size={}",
                     p.tp, p.pp, p.cp, p.ep, p.dp, p.fsdp, to_string(c.recipe.memory.recompute),
                     c.recipe.train.micro_batch_size);
}

}  // namespace

bool print_plan(const ModelCensus& census, const config::Recipe& recipe, const PlanRequest& request) {
  auto hw = load_hardware_profile(request.hardware);
  if (!request.attention_kernel.empty() && hw.attention_kernels.count(request.attention_kernel))
    hw.attention_kernel = request.attention_kernel;
  if (!request.fp8_linear.empty() && hw.fp8_linear_speedups.count(request.fp8_linear)) hw.fp8_linear = request.fp8_linear;
  fmt::print("plan: {} ({} parameters, {} active per token) on {}: {}\n", recipe.name, count(static_cast<double>(census.total())),
             count(static_cast<double>(census.active())), hw.name, hw.description);
  fmt::print("batch: {} sequences of {} tokens a step, micro batches of {}, dtype {}{}\n", recipe.train.global_batch_size,
             recipe.data.seq_len, recipe.train.micro_batch_size, to_string(recipe.train.dtype),
             recipe.precision.fp8 != model::Float8Scaling::off ? fmt::format(", fp8 {}", to_string(recipe.precision.fp8)) : "");
  bool fits = true;
  try {
    const auto layout = layout_of(recipe, request.nodes, request.gpus_per_node);
    fmt::print("layout: {}\n", layout.describe());
    const auto memory = estimate_memory(census, recipe, layout, hw);
    print_memory(memory, hw);
    print_time(estimate_step_time(census, recipe, layout, hw, request.overlap));
    fits = memory.total() <= hw.memory_gib * kGiB;
    if (!fits) print_does_not_fit(memory, hw);
  } catch (const std::exception& e) {
    if (!request.search) throw;
    fmt::print("layout: the recipe's own does not apply here ({})\n", e.what());
    fits = false;
  }
  if (request.search) {
    int64_t tried = 0;
    const auto best = search_layouts(census, recipe, request.nodes, request.gpus_per_node, hw,
                                     static_cast<size_t>(request.top), &tried);
    fmt::print("\nsearch: {} layouts tried, the fastest {} that fit:\n", tried, best.size());
    const int64_t world = request.nodes * request.gpus_per_node;
    if (tried == 0)
      fmt::print("  none: no layout of {} ranks gives every data rank whole micro batches of the global batch of {} "
                 "sequences with the heads, layers and experts split evenly; set train.global_batch_size to a "
                 "multiple of the data ranks (up to {}), or plan fewer nodes\n",
                 world, recipe.train.global_batch_size, world);
    else if (best.empty())
      fmt::print("  none: every layout tried needs more than the {:.1f} GiB of a {}; plan more nodes, or a shorter "
                 "data.seq_len or train.micro_batch_size\n",
                 hw.memory_gib, hw.name);
    for (size_t i = 0; i < best.size(); ++i) {
      const auto& c = best[i];
      fmt::print("  {}. {}; recompute {}, micro batch {}: {:.1f} GiB, {:.3f} s a step, MFU {:.1f}%, {:.0f} tokens/s "
                 "per device\n     {}\n",
                 i + 1, c.layout.describe(), to_string(c.recipe.memory.recompute), c.recipe.train.micro_batch_size,
                 c.memory.total() / kGiB, c.time.seconds(), 100 * c.time.mfu(), c.time.tokens_per_second_per_device(),
                 options_of(c));
      const auto& top = c.time.terms;
      const auto dominant = std::max_element(top.begin(), top.end(), [](const TimeTerm& a, const TimeTerm& b) {
        return a.seconds < b.seconds;
      });
      fmt::print("     dominated by {} ({:.0f}% of the step)\n", dominant->name,
                 100 * dominant->seconds / c.time.seconds());
    }
  }
  return fits;
}

}  // namespace xtrain::plan
