#include "parallel/tcp_agent_store.h"

#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <c10/util/Logging.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "util/input_error.h"

namespace xtrain::parallel {
namespace {

using launch::AgentStore;
using launch::LaunchOptions;
using launch::RankFailure;
using launch::failure_from_json_text;

std::vector<uint8_t> bytes(const std::string& text) { return {text.begin(), text.end()}; }
std::string text(const std::vector<uint8_t>& bytes) { return {bytes.begin(), bytes.end()}; }

std::string first_error_line(const std::string& text) { return text.substr(0, text.find('\n')); }
std::string without_full_stop(const std::string& text) {
  return !text.empty() && text.back() == '.' ? text.substr(0, text.size() - 1) : text;
}

// c10d logs each failed connection attempt, and each call that meets a closed socket, with the
// C++ frame its exception was raised from ("Exception raised from ... (most recent call first)"):
// while node 0's launcher is not there yet, or is gone, a screenful before the one line that
// guarded_store_call throws. Fatal errors only while a store call is in flight; the launcher
// calls its store from one thread.
class QuietAgentStoreLog {
 public:
  QuietAgentStoreLog() : saved_level_(FLAGS_caffe2_log_level) { FLAGS_caffe2_log_level = 3; }
  ~QuietAgentStoreLog() { FLAGS_caffe2_log_level = saved_level_; }
  QuietAgentStoreLog(const QuietAgentStoreLog&) = delete;
  QuietAgentStoreLog& operator=(const QuietAgentStoreLog&) = delete;

 private:
  int saved_level_;
};

// Runs one store operation; its failure becomes a message naming the store.
template <typename Operation>
auto guarded_store_call(const char* action, const std::string& address, Operation operation,
                        const std::string& hint = "") {
  QuietAgentStoreLog quiet;
  try {
    return operation();
  } catch (const std::exception& error) {
    throw std::runtime_error(
        fmt::format("launch: cannot {} the launchers' store at {} (node 0's launcher hosts it): {}{}", action, address,
                    hint.empty() ? first_error_line(error.what()) : without_full_stop(first_error_line(error.what())),
                    hint));
  }
}

class TcpAgentStore : public AgentStore {
  // Defined before its first use, which deduces its return type.
  template <typename Operation>
  auto guarded(const char* action, Operation operation) {
    return guarded_store_call(action, address_, operation);
  }

 public:
  explicit TcpAgentStore(const LaunchOptions& options)
      : nnodes_(options.nnodes),
        node_rank_(options.node_rank),
        address_(fmt::format("{}:{}", options.master_addr, options.master_port + 1)) {
    c10d::TCPStoreOptions store_options;
    store_options.port = static_cast<uint16_t>(options.master_port + 1);
    store_options.isServer = options.node_rank == 0;
    store_options.waitWorkers = false;
    store_options.timeout = std::chrono::milliseconds(static_cast<int64_t>(options.join_timeout_s * 1000));
    const std::string hint =
        options.node_rank == 0
            ? ""
            : fmt::format("; start node 0's launcher with the same --master-addr and --master-port within "
                          "--join-timeout={}",
                          options.join_timeout_s);
    guarded_store_call(
        "connect to", address_,
        [&] {
          store_ = std::make_unique<c10d::TCPStore>(options.master_addr, store_options);
          return 0;
        },
        hint);
    check_same_job(options);
  }

  RankFailure publish_failure(int attempt, const RankFailure& failure) override {
    const auto first = guarded("publish a failure to", [&] {
      return store_->compareSet(key(attempt, "failure"), {}, bytes(to_json_text(failure)));
    });
    return failure_from_json_text(text(first));
  }
  std::optional<RankFailure> published_failure(int attempt) override {
    const std::string name = key(attempt, "failure");
    if (!guarded("poll", [&] { return store_->check({name}); })) return std::nullopt;
    return failure_from_json_text(text(guarded("read", [&] { return store_->get(name); })));
  }

  void publish_abort(const std::string& reason) override {
    guarded("publish to", [&] { return store_->compareSet("abort", {}, bytes(reason)); });
  }
  std::optional<std::string> published_abort() override {
    if (!guarded("poll", [&] { return store_->check({"abort"}); })) return std::nullopt;
    return text(guarded("read", [&] { return store_->get("abort"); }));
  }

  void set_value(const std::string& name, const std::string& value) override {
    guarded("publish to", [&] {
      store_->set(name, bytes(value));
      return 0;
    });
  }
  std::optional<std::string> value(const std::string& name) override {
    if (!guarded("poll", [&] { return store_->check({name}); })) return std::nullopt;
    return text(guarded("read", [&] { return store_->get(name); }));
  }
  int64_t add(const std::string& name, int64_t amount) override {
    return guarded("poll", [&] { return store_->add(name, amount); });
  }

  void leave(double timeout_s) override {
    QuietAgentStoreLog quiet;
    try {
      store_->add("left", 1);
      if (node_rank_ != 0) return;
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
      while (store_->add("left", 0) < nnodes_ && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    } catch (const std::exception&) {
      // Node 0 has already closed the store: nothing is left to sign off from.
    }
  }

 private:
  static std::string key(int attempt, const char* name) { return fmt::format("attempt/{}/{}", attempt, name); }

  // Node 0 writes its settings; the others compare theirs, so that a mistyped command on one
  // node stops the job at once instead of hanging it at a restart.
  void check_same_job(const LaunchOptions& o) {
    const std::string settings = nlohmann::json{
        {"nnodes", o.nnodes},
        {"nproc_per_node", o.nproc_per_node},
        {"max_restarts", o.max_restarts},
        {"run_id", o.run_id}}.dump();
    if (node_rank_ == 0) {
      // set(), not compareSet(): only set() wakes a get() that is already waiting for the key.
      guarded("publish to", [&] {
        store_->set("settings", bytes(settings));
        return 0;
      });
      return;
    }
    const std::string node0 = text(guarded("read", [&] { return store_->get("settings"); }));
    if (node0 == settings) return;
    const std::string message = fmt::format(
        "launch: node {} has settings {} but node 0 has {}; every node needs the same --nnodes, "
        "--nproc-per-node, --max-restarts and --run-id",
        node_rank_, settings, node0);
    publish_abort(message);
    leave(0);  // so that node 0 need not wait for this node to sign off
    throw InputError(message);
  }

  int nnodes_;
  int node_rank_;
  std::string address_;
  std::unique_ptr<c10d::TCPStore> store_;
};

}  // namespace

std::unique_ptr<launch::AgentStore> connect_tcp_agent_store(const launch::LaunchOptions& options) {
  return std::make_unique<TcpAgentStore>(options);
}

}  // namespace xtrain::parallel
