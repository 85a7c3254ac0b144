// A device and its links, as the planner sees them: peak GEMM rates by dtype, memory and its
// bandwidth, the bandwidth of the links inside and between nodes, and the fractions of peak
// that each kind of work reaches. Profiles are YAML files (data/hardware/NAME.yaml) that name
// the source of every figure; the datasheet figures are kept apart from the efficiencies, which
// are fitted to measured runs (docs/plan.md says which).
#pragma once
#include <map>
#include <string>
#include <vector>

namespace xtrain::plan {

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// A published attention kernel's forward rate (TFLOP/s, causal, the FlashAttention papers' FLOP
// count) by head dimension and sequence length; rate() interpolates in the logarithms of both and
// holds the end figures beyond the table.
struct AttentionRateTable {
  std::vector<double> head_dims, seq_lens;
  std::vector<std::vector<double>> tflops;  // a row a head dimension, a column a sequence length
  double rate(double head_dim, double seq_len) const;
};

// A published FP8 GEMM's rate (TFLOP/s) by its reduction dimension K at a large M (DeepGEMM's
// table); rate() interpolates in log K and holds the end figures beyond it.
struct GemmRateTable {
  std::vector<double> k, tflops;
  double rate(double k_dim) const;
};

// A published FP8 linear layer's speedup over the same layer in the compute dtype (forward and
// backward, its scaling and casts included) by the size of its forward GEMM, the cube root of
// M x K x N; at() interpolates in log size and holds the end figures beyond the table.
struct LinearSpeedupTable {
  std::vector<double> size, speedup;
  double at(double gemm_size) const;
};

struct HardwareProfile {
  std::string name, description;
  std::vector<std::string> sources;
  double peak_tflops_fp32 = 0, peak_tflops_bf16 = 0, peak_tflops_fp8 = 0;
  double memory_gib = 0;
  double memory_gbs = 0;      // device memory bandwidth, GB/s
  double intra_node_gbs = 0;  // per device, one direction, GB/s (NVLink; shared memory on a CPU)
  double inter_node_gbs = 0;  // per device, one direction, GB/s (its NIC)
  double runtime_gib = 0;     // what every process holds beside the tensors (context, comm buffers)
  // What the allocator holds beyond the live tensors, as a fraction of the memory a step
  // allocates and frees (freed blocks it keeps, fragmentation); 0 when the profile gives none.
  double allocator_overhead = 0;
  // Fractions of peak: large dense GEMMs, attention kernels, experts' grouped GEMMs; and of
  // link bandwidth that collectives reach.
  double gemm_efficiency = 0, attention_efficiency = 0, expert_efficiency = 0, link_efficiency = 0;
  // The published maximum achievable bf16 matmul rate (TFLOP/s, the best shape of a sweep): where
  // given, gemm_efficiency and expert_efficiency are fractions of it rather than of the bf16 peak,
  // so that one fitted fraction serves devices whose GEMMs reach different shares of their peaks.
  double matmul_tflops_bf16 = 0;
  // The rate (TFLOP/s) that gemm_efficiency and expert_efficiency are fractions of, for GEMMs in
  // fp32 or in the compute dtype.
  double gemm_base_tflops(bool fp32) const;
  // Fraction of the fp8 peak that the linear layers' FP8 GEMMs reach, their scaling casts
  // included; 0 when the profile does not give one (the GEMM efficiency then stands in).
  double fp8_gemm_efficiency = 0;
  // Whether collectives run beside the compute (a GPU's copy engines and NCCL's own SMs) or on
  // the cores that compute (Gloo on a CPU: its threads copy every byte through the sockets on the
  // rank's own core), where a prefetch or a bucket hides nothing and every collective adds.
  bool communication_overlaps_compute = true;
  // What a collective the step waits on as soon as it is called (tensor parallelism's, the ring's
  // passes, the experts' exchanges, the pipeline's sends) costs beyond its bytes, in ms: the
  // call, the wake-ups of the threads that run it, the ranks meeting. 0 when the profile gives
  // none (a GPU queues its collectives behind the compute on the stream).
  double collective_latency_ms = 0;
  double fp8_efficiency() const { return fp8_gemm_efficiency > 0 ? fp8_gemm_efficiency : gemm_efficiency; }
  // Published attention kernels by name (fa2, fa3, cudnn) and the one the engine runs (xtrain:
  // LibTorch's flash attention, FA2); without tables attention runs at attention_efficiency of peak.
  std::map<std::string, AttentionRateTable> attention_kernels;
  std::string attention_kernel;
  const AttentionRateTable* attention_table(const std::string& kernel = "") const;
  // Published FP8 GEMM rates by shape; without them FP8 GEMMs run at fp8_efficiency() of peak.
  GemmRateTable fp8_gemm_tflops;
  // The tokens an expert's grouped GEMM needs to reach half its large-shape rate: the rate at t
  // tokens an expert is expert_efficiency x t / (t + this) of peak (0: no such loss).
  double grouped_gemm_half_tokens = 0;
  // Published FP8 linear layers by implementation (torchao: torchtitan's Float8Linear) and the
  // one the engine runs; empty: FP8 GEMMs at fp8_gemm_tflops and their casts a term of their own.
  std::map<std::string, LinearSpeedupTable> fp8_linear_speedups;
  std::string fp8_linear;
  const LinearSpeedupTable* fp8_linear_table() const;
};

// NAME (a file data/hardware/NAME.yaml under the source tree or beside the executable's) or a
// path to a YAML file. Throws util::InputError naming the file, the line and the field for a
// figure that is not finite or not within what a device could have (docs/plan.md lists the
// bounds), a value of the wrong YAML type, or a loop of based_on (naming the chain of files).
HardwareProfile load_hardware_profile(const std::string& name_or_file);
// The names of the profiles shipped in data/hardware.
std::vector<std::string> hardware_profile_names();

}  // namespace xtrain::plan
