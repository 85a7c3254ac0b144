#include "parallel/thread_comm.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <tuple>
#include <mutex>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

namespace xtrain::parallel {
namespace {

// One rank's part of the collective in progress.
struct Call {
  Call(std::string op_, std::string signature_, torch::Tensor out_ = {}, torch::Tensor in_ = {},
       std::vector<int64_t> out_splits_ = {}, std::vector<int64_t> in_splits_ = {})
      : op(std::move(op_)),
        signature(std::move(signature_)),
        out(std::move(out_)),
        in(std::move(in_)),
        out_splits(std::move(out_splits_)),
        in_splits(std::move(in_splits_)) {}
  std::string op;
  std::string signature;  // what must be equal on every rank, e.g. "of 6 elements"
  torch::Tensor out, in;
  std::vector<int64_t> out_splits, in_splits;
};
using Compute = std::function<void(std::vector<Call>&)>;

// The state the ranks of one group share.
class ThreadGroup {
 public:
  ThreadGroup(int64_t size, std::string name, std::chrono::milliseconds timeout)
      : size_(size), name_(std::move(name)), timeout_(timeout), calls_(static_cast<size_t>(size)) {}

  int64_t size() const { return size_; }
  const std::string& name() const { return name_; }

  void collective(int64_t rank, Call call, const Compute& compute) {
    std::unique_lock<std::mutex> lock(mutex_);
    const int64_t index = completed_;
    const std::string op = call.op;
    if (broken_.empty()) {
      calls_[static_cast<size_t>(rank)] = std::move(call);
      if (++arrived_ == size_)
        complete(index, compute);
      else if (!changed_.wait_for(lock, timeout_, [&] { return completed_ != index || !broken_.empty(); }))
        break_group(index, fmt::format("{} did not complete within {} ms: rank(s) {} never called it", describe(op),
                                       timeout_.count(), fmt::join(absent_ranks(), ",")));
    }
    if (!broken_.empty() && (completed_ == index || failed_index_ == index)) fail(lock);
  }

  void send(int64_t from, int64_t to, int64_t tag, const torch::Tensor& tensor) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!broken_.empty()) fail(lock);
    mailboxes_[{from, to, tag}].push_back(tensor.detach().clone());
    changed_.notify_all();
  }

  void recv(int64_t to, int64_t from, int64_t tag, const torch::Tensor& tensor) {
    std::unique_lock<std::mutex> lock(mutex_);
    auto& box = mailboxes_[{from, to, tag}];
    if (!changed_.wait_for(lock, timeout_, [&] { return !box.empty() || !broken_.empty(); }))
      break_group(completed_, fmt::format("recv by rank {} from rank {} on thread group '{}' did not complete within {} "
                                          "ms: no matching send",
                                          to, from, name_, timeout_.count()));
    if (!broken_.empty()) fail(lock);
    TORCH_CHECK(box.front().numel() == tensor.numel(), "recv by rank ", to, " from rank ", from, " on thread group '",
                name_, "': ", box.front().numel(), " elements sent, ", tensor.numel(), " expected");
    tensor.copy_(box.front().view(tensor.sizes()));
    box.pop_front();
  }

 private:
  std::string describe(const std::string& op) const {
    return fmt::format("{} on thread group '{}' ({} ranks)", op, name_, size_);
  }

  // Under the lock, by the last rank to arrive: checks that every rank called the same thing,
  // computes it, and releases the others.
  void complete(int64_t index, const Compute& compute) {
    const Call& first = *calls_.front();
    std::string problem;
    for (size_t r = 1; r < calls_.size() && problem.empty(); ++r)
      if (calls_[r]->op != first.op || calls_[r]->signature != first.signature)
        problem = fmt::format("rank {} called {} {} while rank 0 called {} {}", r, calls_[r]->op,
                              calls_[r]->signature, first.op, first.signature);
    if (problem.empty()) {
      std::vector<Call> calls;
      for (auto& c : calls_) calls.push_back(*c);
      try {
        compute(calls);
      } catch (const std::exception& e) {
        problem = e.what();
      }
    }
    const std::string op = first.op;
    for (auto& c : calls_) c.reset();
    arrived_ = 0;
    ++completed_;
    if (!problem.empty()) break_group(index, describe(op) + ": " + problem);
    changed_.notify_all();
  }

  void break_group(int64_t index, std::string why) {
    if (broken_.empty()) {
      broken_ = std::move(why);
      failed_index_ = index;
    }
    changed_.notify_all();
  }

  std::vector<int64_t> absent_ranks() const {
    std::vector<int64_t> absent;
    for (size_t r = 0; r < calls_.size(); ++r)
      if (!calls_[r]) absent.push_back(static_cast<int64_t>(r));
    return absent;
  }

  [[noreturn]] void fail(std::unique_lock<std::mutex>& lock) {
    const std::string message = broken_;
    lock.unlock();
    collective_failed(message);
  }

  const int64_t size_;
  const std::string name_;
  const std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::optional<Call>> calls_;  // of the collective in progress, by rank
  int64_t arrived_ = 0;
  int64_t completed_ = 0;  // collectives so far
  std::string broken_;     // the first failure; every later call reports it
  int64_t failed_index_ = -1;
  std::map<std::tuple<int64_t, int64_t, int64_t>, std::deque<torch::Tensor>> mailboxes_;  // (from, to, tag)
};

// Row counts of an all-to-all: the given splits, or equal parts. Problems are thrown as plain
// messages, which complete() passes to every rank.
std::vector<int64_t> row_splits(const std::vector<int64_t>& splits, int64_t rows, int64_t ranks, const char* what,
                                size_t rank) {
  if (splits.empty()) {
    if (rows % ranks != 0)
      throw std::runtime_error(fmt::format("all_to_all: rank {}'s {} has {} rows, not a multiple of {} ranks", rank,
                                           what, rows, ranks));
    return std::vector<int64_t>(static_cast<size_t>(ranks), rows / ranks);
  }
  int64_t total = 0;
  for (auto s : splits) total += s;
  if (static_cast<int64_t>(splits.size()) != ranks || total != rows)
    throw std::runtime_error(fmt::format("all_to_all: rank {}'s {} splits [{}] do not split its {} rows over {} ranks",
                                         rank, what, fmt::join(splits, ","), rows, ranks));
  return splits;
}

void compute_all_to_all(std::vector<Call>& calls) {
  const auto ranks = static_cast<int64_t>(calls.size());
  std::vector<std::vector<int64_t>> sends, receives;
  for (size_t r = 0; r < calls.size(); ++r) {
    sends.push_back(row_splits(calls[r].in_splits, calls[r].in.size(0), ranks, "input", r));
    receives.push_back(row_splits(calls[r].out_splits, calls[r].out.size(0), ranks, "output", r));
  }
  for (size_t s = 0; s < calls.size(); ++s)
    for (size_t r = 0; r < calls.size(); ++r)
      if (sends[s][r] != receives[r][s])
        throw std::runtime_error(fmt::format("all_to_all: rank {} sends {} row(s) to rank {}, which expects {}", s,
                                             sends[s][r], r, receives[r][s]));
  for (size_t s = 0; s < calls.size(); ++s) {
    int64_t sent = 0;
    for (size_t r = 0; r < calls.size(); ++r) {
      const int64_t rows = sends[s][r];
      int64_t at = 0;
      for (size_t q = 0; q < s; ++q) at += receives[r][q];
      if (rows > 0) calls[r].out.narrow(0, at, rows).copy_(calls[s].in.narrow(0, sent, rows));
      sent += rows;
    }
  }
}

torch::Tensor sum_in_rank_order(const std::vector<Call>& calls) {
  auto sum = calls.front().in.reshape(-1).clone();
  for (size_t r = 1; r < calls.size(); ++r) sum.add_(calls[r].in.reshape(-1));
  return sum;
}

class ThreadComm : public Comm {
 public:
  ThreadComm(std::shared_ptr<ThreadGroup> group, int64_t rank) : group_(std::move(group)), rank_(rank) {}
  int64_t rank() const override { return rank_; }
  int64_t size() const override { return group_->size(); }
  const std::string& name() const override { return group_->name(); }

  PendingCollective all_gather(torch::Tensor out, torch::Tensor in) override {
    const int64_t n = in.numel();
    TORCH_CHECK(out.numel() == n * size(), "all_gather: out must hold size * in.numel() elements");
    run({"all_gather", elements(n), out, in}, [n](std::vector<Call>& calls) {
      for (auto& receiver : calls)
        for (size_t s = 0; s < calls.size(); ++s)
          receiver.out.view(-1).narrow(0, static_cast<int64_t>(s) * n, n).copy_(calls[s].in.reshape(-1));
    });
    return {};
  }

  PendingCollective reduce_scatter_sum(torch::Tensor out, torch::Tensor in) override {
    const int64_t n = out.numel();
    TORCH_CHECK(in.numel() == n * size(), "reduce_scatter: in must hold size * out.numel() elements");
    run({"reduce_scatter", elements(in.numel()), out, in}, [n](std::vector<Call>& calls) {
      const auto sum = sum_in_rank_order(calls);
      for (size_t r = 0; r < calls.size(); ++r)
        calls[r].out.view(-1).copy_(sum.narrow(0, static_cast<int64_t>(r) * n, n));
    });
    return {};
  }

  PendingCollective all_reduce_sum(torch::Tensor t) override {
    run({"all_reduce", elements(t.numel()), t, t}, [](std::vector<Call>& calls) {
      const auto sum = sum_in_rank_order(calls);
      for (auto& c : calls) c.out.view(-1).copy_(sum);
    });
    return {};
  }

  PendingCollective broadcast(torch::Tensor t, int64_t root) override {
    Call call{"broadcast", fmt::format("{} from rank {}", elements(t.numel()), root), t, t};
    run(std::move(call), [root](std::vector<Call>& calls) {
      for (auto& c : calls)
        if (!c.out.is_same(calls[static_cast<size_t>(root)].out)) c.out.copy_(calls[static_cast<size_t>(root)].out);
    });
    return {};
  }

  PendingCollective all_to_all(torch::Tensor out, torch::Tensor in, std::vector<int64_t> out_splits,
                               std::vector<int64_t> in_splits) override {
    TORCH_CHECK(in.dim() >= 1 && out.dim() == in.dim() && out.sizes().slice(1) == in.sizes().slice(1),
                "all_to_all: in and out must be rows of the same shape, got ", in.sizes(), " and ", out.sizes());
    Call call{"all_to_all", fmt::format("of rows shaped [{}]", fmt::join(in.sizes().slice(1).vec(), ", ")), out, in,
              std::move(out_splits), std::move(in_splits)};
    run(std::move(call), compute_all_to_all);
    return {};
  }

  PendingCollective send_recv(const std::vector<PeerTransfer>& transfers) override {
    for (const auto& t : transfers)
      TORCH_CHECK(t.peer >= 0 && t.peer < size(), "send_recv: peer ", t.peer, " is not in group '", name(), "' of ",
                  size(), " ranks");
    // Sends never block here, so posting them all before the first receive cannot deadlock.
    for (const auto& t : transfers)
      if (t.kind == PeerTransfer::Kind::send) group_->send(rank_, t.peer, t.tag, t.tensor);
    for (const auto& t : transfers)
      if (t.kind == PeerTransfer::Kind::recv) group_->recv(rank_, t.peer, t.tag, t.tensor);
    return {};
  }

  void barrier() override {
    run({"barrier", "", {}, {}}, [](std::vector<Call>&) {});
  }

 private:
  static std::string elements(int64_t n) { return fmt::format("of {} elements", n); }
  void run(Call call, const Compute& compute) {
    note_collective(fmt::format("{} on thread group '{}'", call.op, name()));
    group_->collective(rank_, std::move(call), compute);
  }

  std::shared_ptr<ThreadGroup> group_;
  int64_t rank_;
};

}  // namespace

std::vector<std::shared_ptr<Comm>> make_thread_comms(int64_t size, std::string name,
                                                     std::chrono::milliseconds timeout) {
  TORCH_CHECK(size >= 1, "a thread group needs at least one rank, got ", size);
  auto group = std::make_shared<ThreadGroup>(size, std::move(name), timeout);
  std::vector<std::shared_ptr<Comm>> comms;
  for (int64_t r = 0; r < size; ++r) comms.push_back(std::make_shared<ThreadComm>(group, r));
  return comms;
}

std::shared_ptr<Comm> ThreadWorld::make_group(int64_t caller, const std::string& name,
                                              const std::vector<int64_t>& ranks) {
  const auto member = std::find(ranks.begin(), ranks.end(), caller);
  TORCH_CHECK(member != ranks.end(), "rank ", caller, " asked for group '", name, "' without being in it");
  std::lock_guard<std::mutex> lock(mutex_);
  auto& comms = groups_[{name, ranks}];
  if (comms.empty()) comms = make_thread_comms(static_cast<int64_t>(ranks.size()), name, timeout_);
  return comms[static_cast<size_t>(member - ranks.begin())];
}

}  // namespace xtrain::parallel
