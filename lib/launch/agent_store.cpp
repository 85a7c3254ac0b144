#include "launch/agent_store.h"

#include <map>

namespace xtrain::launch {
namespace {

class LocalAgentStore : public AgentStore {
 public:
  RankFailure publish_failure(int attempt, const RankFailure& failure) override {
    return failures_.emplace(attempt, failure).first->second;
  }
  std::optional<RankFailure> published_failure(int attempt) override {
    const auto found = failures_.find(attempt);
    if (found == failures_.end()) return std::nullopt;
    return found->second;
  }
  void publish_abort(const std::string&) override {}
  std::optional<std::string> published_abort() override { return std::nullopt; }
  void leave(double) override {}
  void set_value(const std::string& key, const std::string& value) override { values_[key] = value; }
  std::optional<std::string> value(const std::string& key) override {
    const auto found = values_.find(key);
    if (found == values_.end()) return std::nullopt;
    return found->second;
  }
  int64_t add(const std::string& key, int64_t amount) override { return counters_[key] += amount; }

 private:
  std::map<int, RankFailure> failures_;  // by attempt
  std::map<std::string, std::string> values_;
  std::map<std::string, int64_t> counters_;
};

}  // namespace

std::unique_ptr<AgentStore> connect_agent_store(const LaunchOptions& options, const AgentStoreConnector& connect_tcp) {
  if (options.nnodes == 1) return std::make_unique<LocalAgentStore>();
  return connect_tcp(options);
}

}  // namespace xtrain::launch
