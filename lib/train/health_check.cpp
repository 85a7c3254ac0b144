#include "train/health_check.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>

#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include "parallel/world.h"
#include "train/run_setup.h"
#include "device/device.h"

namespace xtrain::train {
namespace {

using Clock = std::chrono::steady_clock;

void synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n == 0 ? 0.0 : n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

std::string host_name() {
  char buffer[256] = {};
  if (::gethostname(buffer, sizeof(buffer) - 1) != 0) return "unknown";
  return buffer;
}

uint64_t fnv1a(const torch::Tensor& t) {
  const auto bytes = t.contiguous().to(torch::kCPU);
  const auto* data = static_cast<const unsigned char*>(bytes.data_ptr());
  uint64_t hash = 1469598103934665603ULL;
  for (size_t i = 0; i < bytes.nbytes(); ++i) hash = (hash ^ data[i]) * 1099511628211ULL;
  return hash;
}

// X <- tanh(A X), from seeded A and X: every healthy rank gets the same bits.
uint64_t matmul_chain_hash(const HealthOptions& options, const torch::Device& device, bool corrupt) {
  const int64_t n = options.matmul_size;
  auto generator = at::make_generator<at::CPUGeneratorImpl>(20261204);
  auto a = torch::randn({n, n}, generator) / std::sqrt(static_cast<double>(n));
  auto x = torch::randn({n, n}, generator);
  if (corrupt) a[0][0] += 1e-3;
  a = a.to(device);
  x = x.to(device);
  for (int64_t i = 0; i < options.chain_length; ++i) x = torch::tanh(torch::matmul(a, x));
  return fnv1a(x);
}

double matmul_gflops(const HealthOptions& options, const torch::Device& device, bool slow) {
  const int64_t n = options.matmul_size;
  const auto a = torch::randn({n, n}, torch::TensorOptions().device(device));
  const auto b = torch::randn({n, n}, torch::TensorOptions().device(device));
  auto warm = torch::matmul(a, b);
  synchronize(device);
  std::vector<double> seconds;
  for (int64_t r = 0; r < options.matmul_repeats; ++r) {
    const auto start = Clock::now();
    for (int times = 0; times < (slow ? 8 : 1); ++times) warm = torch::matmul(a, b);
    synchronize(device);
    seconds.push_back(seconds_since(start));
  }
  return 2.0 * static_cast<double>(n * n * n) / std::max(median(seconds), 1e-9) * 1e-9;
}

// Every rank's `values` (the same count on each), in rank order, on the host.
std::vector<double> gather_doubles(parallel::Comm& world, const std::vector<double>& values, const torch::Device& device) {
  const auto in = torch::tensor(values, torch::kFloat64).to(device);
  auto out = torch::empty({world.size() * in.numel()}, in.options());
  world.all_gather(out, in).wait();
  const auto host = out.to(torch::kCPU);
  return {host.data_ptr<double>(), host.data_ptr<double>() + host.numel()};
}

std::vector<std::string> gather_hosts(parallel::Comm& world, const torch::Device& device) {
  constexpr int64_t kWidth = 64;
  auto name = host_name().substr(0, kWidth - 1);
  auto in = torch::zeros({kWidth}, torch::kUInt8);
  std::copy(name.begin(), name.end(), in.data_ptr<uint8_t>());
  auto out = torch::empty({world.size() * kWidth}, torch::TensorOptions().dtype(torch::kUInt8).device(device));
  world.all_gather(out, in.to(device)).wait();
  const auto host = out.to(torch::kCPU);
  std::vector<std::string> hosts;
  for (int64_t r = 0; r < world.size(); ++r)
    hosts.emplace_back(reinterpret_cast<const char*>(host.data_ptr<uint8_t>() + r * kWidth));
  return hosts;
}

// One collective of `bytes` per rank on `group`, timed on this rank (median of 3 after a warm-up).
double time_collective(parallel::Comm& group, const std::string& collective, int64_t bytes,
                       const torch::Device& device) {
  const int64_t n = group.size(), elements = std::max<int64_t>(n, bytes / 4 / n * n);
  const auto options = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  auto in = torch::ones({elements}, options), out = torch::empty({elements * n}, options);
  auto once = [&] {
    if (collective == "all_reduce") {
      group.all_reduce_sum(in).wait();
    } else if (collective == "all_gather") {
      group.all_gather(out, in).wait();
    } else if (collective == "all_to_all") {
      auto received = torch::empty_like(in);
      group.all_to_all(received, in, {}, {}).wait();
    } else {  // send_recv: to the next rank, from the previous
      auto received = torch::empty_like(in);
      using Kind = parallel::PeerTransfer::Kind;
      group.send_recv({{Kind::send, in, (group.rank() + 1) % n}, {Kind::recv, received, (group.rank() + n - 1) % n}})
          .wait();
    }
    synchronize(device);
  };
  once();
  std::vector<double> seconds;
  for (int i = 0; i < 3; ++i) {
    const auto start = Clock::now();
    once();
    seconds.push_back(seconds_since(start));
  }
  return median(seconds);
}

// nccl-tests' bus bandwidth: what each rank's links carry, whatever the collective's algorithm.
double bus_gbps(const std::string& collective, int64_t ranks, int64_t bytes, double seconds) {
  const double n = static_cast<double>(ranks), size = static_cast<double>(bytes);
  const double moved = collective == "all_reduce"   ? 2 * (n - 1) / n * size
                       : collective == "all_gather" ? (n - 1) * size
                       : collective == "all_to_all" ? (n - 1) / n * size
                                                    : size;
  return moved / std::max(seconds, 1e-12) * 1e-9;
}

// The mesh's groups of more than one rank, by dimension; a dimension that spans the whole job
// is the world group again and is left out.
std::vector<parallel::Dim> link_dimensions(const parallel::DeviceMesh& mesh) {
  using parallel::Dim;
  std::vector<Dim> dims;
  const int64_t world = mesh.size(Dim::world);
  if (world > 1) dims.push_back(Dim::world);
  for (Dim d : {Dim::pp, Dim::dp, Dim::fsdp, Dim::cp, Dim::tp, Dim::ep})
    if (mesh.size(d) > 1 && mesh.size(d) < world) dims.push_back(d);
  return dims;
}

// The latency of a small all-reduce on `group` between segments of compute, as training meets
// its blocking collectives (tensor parallelism's, the ring's, the experts' exchanges): the time
// each one adds to a loop of matmuls, against the same all-reduce in a loop of its own. On
// shared cores the first is larger: the collective's threads wait to be scheduled and the ranks
// reach it at different moments. Timed on this rank; medians of 3 loops of each kind.
CollectiveLatency time_latency(parallel::Comm& group, const torch::Device& device) {
  constexpr int64_t kCalls = 16, kMatmul = 384;
  constexpr double kSegmentSeconds = 2e-3;  // about the compute between two TP collectives here
  const auto options = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  const auto a = torch::randn({kMatmul, kMatmul}, options), b = torch::randn({kMatmul, kMatmul}, options);
  auto small = torch::ones({1024}, options);  // 4 KiB: what it costs is the call, not the bytes
  auto product = torch::matmul(a, b);
  synchronize(device);
  auto start = Clock::now();
  for (int i = 0; i < 4; ++i) product = torch::matmul(a, b);
  synchronize(device);
  // Every rank runs the slowest rank's count of matmuls a segment, so that no rank waits by design.
  const auto mine = torch::full({1}, std::ceil(kSegmentSeconds / std::max(seconds_since(start) / 4, 1e-7)), options);
  auto counts = torch::empty({group.size()}, options);
  group.all_gather(counts, mine).wait();
  const int64_t matmuls = std::clamp<int64_t>(static_cast<int64_t>(counts.max().item<float>()), 1, 1000);
  auto loop = [&](bool compute, bool collective) {
    group.barrier();
    const auto started = Clock::now();
    for (int64_t call = 0; call < kCalls; ++call) {
      if (compute) {
        for (int64_t m = 0; m < matmuls; ++m) product = torch::matmul(a, b);
        synchronize(device);
      }
      if (collective) group.all_reduce_sum(small).wait();
    }
    synchronize(device);
    return seconds_since(started) / kCalls;
  };
  std::vector<double> alone, computing, beside;
  for (int round = 0; round < 3; ++round) {
    alone.push_back(loop(false, true));
    computing.push_back(loop(true, false));
    beside.push_back(loop(true, true));
  }
  return {"", group.size(), median(alone), std::max(0.0, median(beside) - median(computing))};
}

// time_latency on each group of the mesh, the slowest rank's figures.
std::vector<CollectiveLatency> measure_latencies(const parallel::DeviceMesh& mesh, const torch::Device& device) {
  std::vector<CollectiveLatency> latencies;
  auto& world = *mesh.group(parallel::Dim::world);
  for (const auto dim : link_dimensions(mesh)) {
    auto latency = time_latency(*mesh.group(dim), device);
    const auto all = gather_doubles(world, {latency.alone_s, latency.beside_compute_s}, device);
    latency.group = to_string(dim);
    latency.alone_s = latency.beside_compute_s = 0;
    for (size_t r = 0; r < all.size(); r += 2) {
      latency.alone_s = std::max(latency.alone_s, all[r]);
      latency.beside_compute_s = std::max(latency.beside_compute_s, all[r + 1]);
    }
    latencies.push_back(latency);
  }
  return latencies;
}

std::vector<LinkRate> measure_links(const parallel::DeviceMesh& mesh, const torch::Device& device,
                                    const HealthOptions& options) {
  std::vector<LinkRate> links;
  auto& world = *mesh.group(parallel::Dim::world);
  for (const auto dim : link_dimensions(mesh)) {
    auto& group = *mesh.group(dim);
    for (const char* collective : {"all_reduce", "all_gather", "all_to_all", "send_recv"}) {
      const double mine = time_collective(group, collective, options.message_bytes, device);
      const auto all = gather_doubles(world, {mine}, device);
      const double slowest = *std::max_element(all.begin(), all.end());
      links.push_back({to_string(dim), group.size(), collective, slowest,
                       bus_gbps(collective, group.size(), options.message_bytes, slowest)});
    }
  }
  return links;
}

}  // namespace

HealthFault health_fault() { return util::health_fault_from_environment(); }

HealthReport check_health(const parallel::DeviceMesh& mesh, const torch::Device& device,
                          const HealthOptions& options) {
  const auto fault = health_fault();
  auto& world = *mesh.group(parallel::Dim::world);
  const int64_t rank = world.rank();
  const uint64_t hash = matmul_chain_hash(options, device, rank == fault.corrupt_rank);
  const double gflops = matmul_gflops(options, device, rank == fault.slow_rank);
  // The hash in two 32-bit halves, each exact in a double.
  const auto gathered = gather_doubles(
      world, {gflops, static_cast<double>(hash >> 32), static_cast<double>(hash & 0xffffffffULL)}, device);
  const auto hosts = gather_hosts(world, device);
  HealthReport report;
  std::map<uint64_t, int64_t> holders;
  std::vector<double> rates;
  for (int64_t r = 0; r < world.size(); ++r) {
    const double* row = gathered.data() + 3 * r;
    const uint64_t result = (static_cast<uint64_t>(row[1]) << 32) | static_cast<uint64_t>(row[2]);
    report.ranks.push_back({r, hosts[static_cast<size_t>(r)], row[0], result});
    ++holders[result];
    rates.push_back(row[0]);
  }
  // The result most ranks hold; a tie goes to the lowest rank's.
  uint64_t agreed = report.ranks.front().result_hash;
  for (const auto& r : report.ranks)
    if (holders[r.result_hash] > holders[agreed]) agreed = r.result_hash;
  report.median_gflops = median(rates);
  for (auto& r : report.ranks) {
    r.wrong_result = r.result_hash != agreed;
    r.slow = world.size() > 1 && r.matmul_gflops < (1.0 - options.slow_fraction) * report.median_gflops;
  }
  report.links = measure_links(mesh, device, options);
  report.latencies = measure_latencies(mesh, device);
  return report;
}

bool HealthReport::healthy() const {
  return std::none_of(ranks.begin(), ranks.end(), [](const RankHealth& r) { return r.slow || r.wrong_result; });
}

std::vector<std::string> HealthReport::problems(const HealthOptions& options) const {
  std::vector<std::string> lines;
  for (const auto& r : ranks) {
    if (r.wrong_result)
      lines.push_back(fmt::format("rank {} ({}): its seeded matmul chain's result differs from the one most ranks "
                                  "computed (silent data corruption, or a machine unlike the others)",
                                  r.rank, r.host));
    if (r.slow)
      lines.push_back(fmt::format("rank {} ({}): matmul {:.1f} GFLOP/s, {:.2f} x the median {:.1f} (slower than "
                                  "the median by more than {:.0f}%)",
                                  r.rank, r.host, r.matmul_gflops, r.matmul_gflops / median_gflops, median_gflops,
                                  100 * options.slow_fraction));
  }
  return lines;
}

std::string HealthReport::table() const {
  std::string text = fmt::format("{:>5}  {:<20}  {:>14}  {}\n", "rank", "host", "matmul GFLOP/s", "result");
  for (const auto& r : ranks)
    text += fmt::format("{:>5}  {:<20}  {:>14.1f}  {}{}\n", r.rank, r.host, r.matmul_gflops,
                        r.wrong_result ? "DIFFERS" : "agrees",
                        r.slow ? fmt::format("  SLOW ({:.2f} x the median)", r.matmul_gflops / median_gflops) : "");
  if (links.empty()) return text;
  text += fmt::format("{:>6}  {:>5}  {:<10}  {:>10}  {:>9}\n", "group", "ranks", "collective", "time ms", "bus GB/s");
  for (const auto& l : links)
    text += fmt::format("{:>6}  {:>5}  {:<10}  {:>10.3f}  {:>9.3f}\n", l.group, l.ranks, l.collective,
                        1e3 * l.seconds, l.bus_gbps);
  if (latencies.empty()) return text;
  text += fmt::format("{:>6}  {:>5}  {:<10}  {:>10}  {:>17}\n", "group", "ranks", "latency", "alone ms",
                      "beside compute ms");
  for (const auto& l : latencies)
    text += fmt::format("{:>6}  {:>5}  {:<10}  {:>10.3f}  {:>17.3f}\n", l.group, l.ranks, "all_reduce",
                        1e3 * l.alone_s, 1e3 * l.beside_compute_s);
  return text;
}

int run_health_check(const config::Recipe& recipe, const HealthOptions& options, bool stop) {
  health_fault();  // a malformed switch fails before any rank joins
  const auto world = parallel::discover_world();
  apply_threads(recipe, world.local_size);
  const auto& p = recipe.parallel;
  const auto degrees = parallel::resolve_degrees({p.dp, p.fsdp, p.tp, p.pp, p.ep, p.cp}, world.size);
  const auto device = util::choose_device(recipe.train.device, world.local_rank);
  const auto mesh = parallel::build_mesh(world, degrees, recipe.dist.timeout_s, comm_backend(recipe.dist.backend, device),
                                         recipe.dist.init_timeout_s);
  const auto report = check_health(mesh, device, options);
  const auto problems = report.problems(options);
  if (world.rank == 0) {
    fmt::print("health: {} rank(s) on {}, matmuls of {} x {}, collectives of {} KiB per rank\n{}", world.size,
               device.str(), options.matmul_size, options.matmul_size, options.message_bytes >> 10, report.table());
    std::fflush(stdout);  // the table before the problems below it
    for (const auto& line : problems) fmt::print(stderr, "health: {}\n", line);
    if (problems.empty()) fmt::print("health: every rank agrees and none is slower than the median by {:.0f}%\n",
                                     100 * options.slow_fraction);
  }
  if (problems.empty() || !stop) return 0;
  if (world.rank == 0) fmt::print(stderr, "health: stopping: {} problem(s) above\n", problems.size());
  return 3;
}

}  // namespace xtrain::train
