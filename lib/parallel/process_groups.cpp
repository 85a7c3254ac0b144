#include "parallel/process_groups.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/torch.h>
#ifdef XTRAIN_CUDA
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "util/input_error.h"

namespace xtrain::parallel {
namespace {

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// A group over one c10d backend: Gloo (CPU tensors) or NCCL (CUDA tensors, stream-ordered:
// wait() makes the current stream wait for the collective, the host does not block).
class C10dComm : public Comm {
 public:
  C10dComm(c10::intrusive_ptr<c10d::Backend> group, std::string name, std::vector<int64_t> ranks,
           std::chrono::milliseconds timeout)
      : group_(std::move(group)), name_(std::move(name)), ranks_(std::move(ranks)), timeout_(timeout) {}

  int64_t rank() const override { return group_->getRank(); }
  int64_t size() const override { return group_->getSize(); }
  const std::string& name() const override { return name_; }

  PendingCollective all_gather(torch::Tensor out, torch::Tensor in) override {
    const int64_t n = in.numel();
    TORCH_CHECK(out.numel() == n * size(), "all_gather: out must hold size * in.numel() elements");
    if (!gloo()) return pending("all_gather", [&] { return group_->_allgather_base(out, in); });
    // Gloo's all-gather assembles a flat copy of `out` and then copies it over: a second copy of
    // the unit being gathered. Each rank's part is broadcast straight into its place instead.
    out.narrow(0, rank() * n, n).copy_(in);
    std::vector<PendingCollective> parts;
    for (int64_t root = 0; root < size(); ++root) {
      std::vector<torch::Tensor> tensors{out.narrow(0, root * n, n)};
      c10d::BroadcastOptions options;
      options.rootRank = root;
      parts.push_back(pending("all_gather", [&] { return group_->broadcast(tensors, options); }));
    }
    return timed([parts]() mutable {
      for (auto& part : parts) part.wait();
    });
  }

  PendingCollective reduce_scatter_sum(torch::Tensor out, torch::Tensor in) override {
    const int64_t n = out.numel();
    TORCH_CHECK(in.numel() == n * size(), "reduce_scatter: in must hold size * out.numel() elements");
    if (!gloo()) return pending("reduce_scatter", [&] { return group_->_reduce_scatter_base(out, in); });
    // Gloo's reduce-scatter is an all-reduce of a clone of `in`, then a copy of this rank's part:
    // the all-reduce runs on `in` itself, which the contract lets us clobber, so that a unit's
    // full gradient (a whole vocabulary table's, say) is not held twice while it reduces.
    std::vector<torch::Tensor> tensors{in};
    auto reduced = pending("reduce_scatter", [&] { return group_->allreduce(tensors); });
    return timed([reduced, out, in, part = rank() * n, n]() mutable {
      reduced.wait();
      out.copy_(in.narrow(0, part, n));
    });
  }

  PendingCollective all_reduce_sum(torch::Tensor t) override {
    std::vector<torch::Tensor> tensors{t};
    return pending("all_reduce", [&] { return group_->allreduce(tensors); });
  }

  PendingCollective broadcast(torch::Tensor t, int64_t root) override {
    std::vector<torch::Tensor> tensors{t};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    return pending("broadcast", [&] { return group_->broadcast(tensors, options); });
  }

  PendingCollective all_to_all(torch::Tensor out, torch::Tensor in, std::vector<int64_t> out_splits,
                               std::vector<int64_t> in_splits) override {
    return pending("all_to_all", [&] { return group_->alltoall_base(out, in, out_splits, in_splits); });
  }

  // NCCL batches the transfers into one group call; Gloo's sends and receives do not block, so
  // issuing them in deadlock_free_order is enough.
  PendingCollective send_recv(const std::vector<PeerTransfer>& transfers) override {
    std::vector<PendingCollective> started;
    const bool coalesce = group_->supportsCoalescing();
    if (coalesce) group_->startCoalescing();
    for (const auto& t : deadlock_free_order(transfers, rank())) {
      std::vector<torch::Tensor> tensors{t.tensor};
      const int peer = static_cast<int>(t.peer);
      const int tag = static_cast<int>(t.tag);
      if (t.kind == PeerTransfer::Kind::send)
        started.push_back(pending(fmt::format("send to rank {}", ranks_[static_cast<size_t>(peer)]),
                                  [&] { return group_->send(tensors, peer, tag); }));
      else
        started.push_back(pending(fmt::format("recv from rank {}", ranks_[static_cast<size_t>(peer)]),
                                  [&] { return group_->recv(tensors, peer, tag); }));
    }
    if (coalesce) started = {pending("send_recv", [&] { return group_->endCoalescing(); })};
    return timed([started]() mutable {
      for (auto& transfer : started) transfer.wait();
    });
  }

  void barrier() override {
    pending("barrier", [&] { return group_->barrier(); }).wait();
  }

 private:
  bool gloo() const { return group_->getBackendName() == "gloo"; }

  std::string describe(const std::string& collective) const {
    return fmt::format("{} on group '{}' (ranks {})", collective, name_, fmt::join(ranks_, ","));
  }

  [[noreturn]] void fail(const std::string& collective, const std::string& why) const {
    if (connection_lost(why)) {
      const std::string diagnosis = diagnose_peers();
      collective_failed(fmt::format("{} failed: a peer closed its connection ({}). {}", describe(collective),
                                    first_line(why),
                                    diagnosis.empty() ? "Another rank has died; its own output names the cause."
                                                      : diagnosis));
    }
    collective_failed(fmt::format(
        "{} did not complete within dist.timeout_s={}: {}. Another rank has died or stalled; its own "
        "output names the cause.",
        describe(collective), timeout_.count() / 1000.0, why));
  }

  // A dead peer shows as a closed socket at once, not as a timeout.
  static bool connection_lost(const std::string& why) {
    for (const char* sign : {"Connection reset", "Connection closed", "Broken pipe", "Socket closed", "EOF"})
      if (why.find(sign) != std::string::npos) return true;
    return false;
  }

  template <typename Start>
  PendingCollective pending(const std::string& collective, Start start) {
    note_collective(describe(collective));
    c10::intrusive_ptr<c10d::Work> work;
    try {
      work = start();
    } catch (const std::exception& e) {
      fail(collective, e.what());
    }
    return timed([this, work, collective] {
      try {
        // The backend enforces the group's timeout itself; the margin only guards against a wait
        // that would outlive it.
        if (!work->wait(timeout_ + std::chrono::seconds(5))) fail(collective, "wait timed out");
      } catch (const CommError&) {
        throw;
      } catch (const std::exception& e) {
        fail(collective, e.what());
      }
    });
  }

  c10::intrusive_ptr<c10d::Backend> group_;
  std::string name_;
  std::vector<int64_t> ranks_;
  std::chrono::milliseconds timeout_;
};

// The local interface and address that the kernel's routing table picks to reach host:port. A
// UDP socket's connect() only looks up the route and sends nothing; getsockname() then gives the
// source address, and getifaddrs() the interface holding it. nullopt when nothing routes there.
struct Route {
  std::string interface, address;
};

bool same_address(const sockaddr* a, const sockaddr* b) {
  if (a->sa_family != b->sa_family) return false;
  if (a->sa_family == AF_INET)
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(b)->sin_addr.s_addr;
  if (a->sa_family == AF_INET6)
    return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                       &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr, sizeof(in6_addr)) == 0;
  return false;
}

std::optional<Route> route_to(const std::string& host, int64_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return std::nullopt;
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> addresses(found, freeaddrinfo);
  ifaddrs* interfaces = nullptr;
  if (getifaddrs(&interfaces) != 0) return std::nullopt;
  std::unique_ptr<ifaddrs, decltype(&freeifaddrs)> interface_list(interfaces, freeifaddrs);
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t length = sizeof local;
    const bool routed =
        connect(fd, a->ai_addr, a->ai_addrlen) == 0 && getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0;
    close(fd);
    if (!routed) continue;
    char address[NI_MAXHOST];
    if (getnameinfo(reinterpret_cast<sockaddr*>(&local), length, address, sizeof address, nullptr, 0, NI_NUMERICHOST) != 0)
      continue;
    for (const ifaddrs* i = interfaces; i != nullptr; i = i->ifa_next)
      if (i->ifa_addr != nullptr && same_address(i->ifa_addr, reinterpret_cast<sockaddr*>(&local)))
        return Route{i->ifa_name, address};
  }
  return std::nullopt;
}

struct GlooDevice {
  std::shared_ptr<::gloo::transport::Device> device;
  std::string description;  // for the start-up log: which interface and why
};

// The interface Gloo's connections use: GLOO_SOCKET_IFNAME as torch reads it (the first of a
// comma-separated list), else NCCL_SOCKET_IFNAME, so that one setting serves a job whichever
// backend it takes (NCCL's "=eth0" exact-match form is accepted; its "^docker" exclusions name
// no interface and are passed over). Otherwise the route to
// MASTER_ADDR: the ranks must reach each other the way they reach the master, and the host name's
// address (c10d's default) is often loopback or unresolvable on cluster nodes and in containers,
// which makes the other nodes' connections fail.
GlooDevice make_device(const World& world) {
  for (const char* variable : {"GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"}) {
    const char* value = std::getenv(variable);
    if (value == nullptr || *value == '\0' || *value == '^') continue;
    std::string interface = value;
    interface = interface.substr(interface.front() == '=' ? 1 : 0);
    interface = interface.substr(0, interface.find(','));  // one device: the first of a list
    try {
      return {c10d::ProcessGroupGloo::createDeviceForInterface(interface),
              fmt::format("interface {}, from {}", interface, variable)};
    } catch (const std::exception& e) {
      collective_failed(fmt::format("{}={}: Gloo cannot use interface {}: {}", variable, value, interface,
                                    first_line(e.what())));
    }
  }
  // Every rank on one host: loopback needs no name resolution, which containers often lack.
  if (world.size == world.local_size)
    return {c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"), "interface lo (127.0.0.1), one host"};
  if (const auto route = route_to(world.master_addr, world.master_port))
    return {c10d::ProcessGroupGloo::createDeviceForHostname(route->address),
            fmt::format("interface {} ({}), the route to MASTER_ADDR {}", route->interface, route->address,
                        world.master_addr)};
  return {c10d::ProcessGroupGloo::createDefaultDevice(),
          fmt::format("the address of this host's name (no route to MASTER_ADDR {} found)", world.master_addr)};
}

}  // namespace

struct ProcessGroups::State {
  World world;
  std::chrono::milliseconds timeout;
  c10::intrusive_ptr<c10d::Store> store;
  std::shared_ptr<::gloo::transport::Device> device;
  std::string network;
  CommBackend backend = CommBackend::gloo;
};

ProcessGroups::ProcessGroups(const World& world, std::chrono::milliseconds timeout, CommBackend backend,
                             std::chrono::milliseconds join_timeout)
    : state_(std::make_unique<State>()) {
#ifndef XTRAIN_CUDA
  if (backend == CommBackend::nccl)
    throw InputError("dist.backend: nccl needs the CUDA paths, which this xtrain was built without; use gloo");
#endif
  state_->backend = backend;
  state_->world = world;
  state_->timeout = timeout;
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(world.master_port);
  options.isServer = world.rank == 0 && !world.agent_store;
  options.numWorkers = static_cast<std::size_t>(world.size);
  options.waitWorkers = false;  // wait_for_every_rank waits, and names who is missing
  options.timeout = join_timeout;
  try {
    // c10d logs every failed connection attempt with a C++ stack trace; the error below says it once.
    const int log_level = FLAGS_caffe2_log_level;
    FLAGS_caffe2_log_level = 3;  // fatal only
    std::unique_ptr<int, std::function<void(int*)>> restore(&FLAGS_caffe2_log_level,
                                                            [log_level](int* level) { *level = log_level; });
    state_->store = c10::make_intrusive<c10d::TCPStore>(world.master_addr, options);
  } catch (const std::exception& e) {
    collective_failed(fmt::format("rank {} could not join the job's store at {}:{} ({} ranks) within "
                                  "dist.init_timeout_s={}: {}; is rank 0 running with the same MASTER_ADDR and "
                                  "MASTER_PORT?",
                                  world.rank, world.master_addr, world.master_port, world.size,
                                  join_timeout.count() / 1000.0, first_line(e.what())));
  }
  wait_for_every_rank(join_timeout);
  // Ranks start at different moments (the launcher, loading the data): making a group may take
  // longer than one collective is allowed to.
  state_->store->setTimeout(std::max(timeout, join_timeout));
  if (backend == CommBackend::gloo) {
    auto gloo = make_device(world);
    state_->device = std::move(gloo.device);
    state_->network = "Gloo on " + gloo.description;
  }
}

c10::intrusive_ptr<c10d::Store> ProcessGroups::store() const { return state_->store; }

const std::string& ProcessGroups::network() const { return state_->network; }

void ProcessGroups::wait_for_every_rank(std::chrono::milliseconds join_timeout) {
  const World& world = state_->world;
  auto& store = *state_->store;
  // Attempts of a restarted job share the store (torchrun's agent keeps it): keys are per attempt.
  const std::string prefix = fmt::format("xtrain/attempt_{}/joined/", world.restart_count);
  store.set(prefix + std::to_string(world.rank), std::vector<uint8_t>{'1'});
  store.add(prefix + "count", 1);
  const auto seconds = join_timeout.count() / 1000.0;
  if (world.rank != 0) {
    try {
      store.wait({prefix + "all"}, join_timeout);
    } catch (const std::exception& e) {
      collective_failed(fmt::format("rank {} waited dist.init_timeout_s={} for the other ranks of {} at {}:{}: {}; "
                                    "rank 0's output names the missing ones",
                                    world.rank, seconds, world.size, world.master_addr, world.master_port,
                                    first_line(e.what())));
    }
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + join_timeout;
  while (store.add(prefix + "count", 0) < world.size) {
    if (std::chrono::steady_clock::now() >= deadline) {
      std::vector<int64_t> missing;
      for (int64_t r = 0; r < world.size; ++r)
        if (!store.check({prefix + std::to_string(r)})) missing.push_back(r);
      collective_failed(fmt::format(
          "rank{} {} of {} never joined at {}:{} within dist.init_timeout_s={}; start every rank with the same "
          "WORLD_SIZE, MASTER_ADDR and MASTER_PORT (a rank that crashed at start says why in its own output)",
          missing.size() == 1 ? "" : "s", fmt::join(missing, ", "), world.size, world.master_addr, world.master_port,
          seconds));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  store.set(prefix + "all", std::vector<uint8_t>{'1'});
}

ProcessGroups::~ProcessGroups() = default;

std::shared_ptr<Comm> make_backend_comm(c10::intrusive_ptr<c10d::Backend> backend, std::string name,
                                        std::vector<int64_t> ranks, std::chrono::milliseconds timeout) {
  return std::make_shared<C10dComm>(std::move(backend), std::move(name), std::move(ranks), timeout);
}

c10::intrusive_ptr<c10d::Backend> ProcessGroups::make_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                              int size) {
#ifdef XTRAIN_CUDA
  if (state_->backend == CommBackend::nccl) {
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = state_->timeout;
    return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
  }
#endif
  auto options = c10d::ProcessGroupGloo::Options::create(state_->timeout);
  options->devices.push_back(state_->device);
  options->threads = 2;
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
}

std::shared_ptr<Comm> ProcessGroups::make_group(const std::string& name, const std::vector<int64_t>& ranks) {
  auto it = std::find(ranks.begin(), ranks.end(), state_->world.rank);
  TORCH_CHECK(it != ranks.end(), "rank ", state_->world.rank, " is not a member of group ", name);
  if (ranks.size() == 1) return make_single_process_comm(name);
  // Attempts of a restarted job share the store (torchrun's agent keeps it): keys are per attempt.
  const std::string prefix =
      fmt::format("attempt_{}/{}/{}", state_->world.restart_count, name, fmt::join(ranks, ","));
  auto store = c10::make_intrusive<c10d::PrefixStore>(prefix, state_->store);
  const int rank = static_cast<int>(it - ranks.begin()), size = static_cast<int>(ranks.size());
  try {
    return make_backend_comm(make_backend(store, rank, size), name, ranks, state_->timeout);
  } catch (const std::exception& e) {
    collective_failed(fmt::format("creating group '{}' (ranks {}) failed within dist.timeout_s={}: {}", name,
                                fmt::join(ranks, ","), state_->timeout.count() / 1000.0, e.what()));
  }
}

}  // namespace xtrain::parallel
