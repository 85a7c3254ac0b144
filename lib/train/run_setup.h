// The set-up of a training process around the engine: which checkpoint to resume, the run
// folder, the communication backend, the memory options, the threads, the frozen parts, and an
// out-of-memory failure turned into what to change in the recipe.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <c10/util/Exception.h>
#include <c10/core/Device.h>

#include "ckpt/checkpoint.h"
#include "config/recipe.h"
#include "memory/memory_policy.h"
#include "parallel/parallelize.h"
#include "parallel/process_groups.h"

namespace xtrain::train {

// The checkpoint to continue from, verified against its manifest and found finite: checkpoint.resume auto (or
// strict) takes `latest`, or the newest intact one when `latest` is damaged; a folder the user
// named must verify. Warnings and the verification's cost go to rank 0's output.
struct ResumeFrom {
  std::string dir;
  std::string verification;  // "verified 3.2 MiB in 0.01 s"
  std::string source = "disk";  // or "memory" (train/memory_checkpoints.h)
};
// checkpoint.resume auto or strict: the run continues from checkpoints/latest when there is one.
bool resumes_from_latest(const config::Recipe& recipe);

std::optional<ResumeFrom> checkpoint_to_resume(const config::Recipe& recipe, const ckpt::CheckpointStore& store,
                                               bool chief);

// Out of memory, reported as what to change rather than as a trace.
[[noreturn]] void out_of_memory(int64_t step, const std::string& what, double peak_rss, double peak_device,
                                const config::Recipe& recipe);
bool is_out_of_memory(const c10::Error& error);

// A run folder that cannot be written (or is a symbolic link) fails now, before any step is spent.
void prepare_run_folder(const std::string& dir);

// dist.backend auto: NCCL for CUDA tensors, Gloo for CPU ones; a mismatch is an InputError.
parallel::CommBackend comm_backend(config::Backend setting, const torch::Device& device);

// The recipe's memory policy and parallel layout options (memory.attention auto resolved).
memory::MemoryOptions memory_options(const config::Recipe& recipe, const torch::Device& device);
// precision.fp8 and precision.fp8_grad resolved (auto: torchao's and DeepSeek-V3's formats).
model::Float8Recipe float8_recipe(const config::PrecisionSection& precision);
// Empty, or what to change when fp8_grad auto gives a recipe a format it converges worse with
// (rowwise's e4m3 on a model with experts).
std::string float8_recipe_warning(const config::Recipe& recipe);
// One warning per FP8 key set (not auto) while precision.fp8 is off, where it does nothing.
std::vector<std::string> float8_unused_key_warnings(const config::PrecisionSection& precision);
parallel::ParallelizeOptions parallelize_options(const config::Recipe& recipe, const torch::Device& device);

// train.threads 0: the cores shared among this machine's ranks, unless OMP_NUM_THREADS (set by
// torchrun and by users) already decides.
void apply_threads(const config::Recipe& recipe, int64_t local_ranks = 1);

// The name prefixes of the parts model.freeze names, and whether a name has one.
std::vector<std::string> frozen_prefixes(const config::Recipe& recipe);
bool has_prefix(const std::string& name, const std::vector<std::string>& prefixes);

}  // namespace xtrain::train
