#include "train/memory_checkpoints.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <stdexcept>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "ckpt/checkpoint.h"
#include "ckpt/sharded_checkpoint.h"
#include "train/run_state.h"
#include "util/posix_file.h"
#include "util/file_digest.h"

namespace fs = std::filesystem;

namespace xtrain::train {
namespace {

double elapsed_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The files of a committed checkpoint folder that `rank` wrote: its shard and its optimizer
// state; rank 0 also everything else (metadata, manifest, a one-process run's whole files).
bool written_by(const std::string& file, int64_t rank) {
  if (file.rfind("shard-", 0) == 0) return file == ckpt::shard_file_name(rank);
  if (file.rfind("optimizer-rank-", 0) == 0) return file == rank_state_file(rank);
  return rank == 0;
}

// A file's bytes, read straight into a host tensor: the one copy out of the page cache.
torch::Tensor read_bytes(const std::string& path) {
  util::InputFile input(path);
  auto bytes = torch::empty({static_cast<int64_t>(input.size())}, torch::kUInt8);
  if (input.read_at(bytes.data_ptr(), input.size(), 0) != input.size())
    throw std::runtime_error(fmt::format("cannot read {}: it shrank while being read", path));
  return bytes;
}

using Files = std::map<std::string, torch::Tensor>;  // name -> bytes (host, uint8)

// Fails, naming the folder and the fix, when the tmpfs has no room for `bytes` more of `what`.
void check_room(const std::string& folder, int64_t bytes, const std::string& what) {
  fs::create_directories(folder);
  struct statvfs space {};
  if (::statvfs(folder.c_str(), &space) != 0) return;  // unknown: the writes will say
  const double free = static_cast<double>(space.f_bavail) * static_cast<double>(space.f_frsize);
  if (free >= static_cast<double>(bytes)) return;
  throw std::runtime_error(fmt::format(
      "{} has {:.1f} MiB free, and {} need about {:.1f} MiB: give the tmpfs more room (docker run --shm-size) or "
      "set XTRAIN_NODE_MEMORY_DIR to a larger one",
      folder, free / (1 << 20), what, static_cast<double>(bytes) / (1 << 20)));
}

Files files_written_by(int64_t rank, const std::string& folder) {
  Files files;
  for (const auto& entry : fs::directory_iterator(folder)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && written_by(name, rank)) files[name] = read_bytes(entry.path().string());
  }
  return files;
}

// Into tmpfs: a file appears whole or not at all (written aside, then renamed).
void write_into(const std::string& folder, const std::string& name, const torch::Tensor& bytes) {
  fs::create_directories(folder);
  const std::string path = folder + "/" + name;
  const auto host = bytes.to(torch::kCPU);
  auto file = util::OutputFile::create(path + ".part");
  file.write(host.data_ptr(), static_cast<size_t>(host.numel()));
  file.close();
  fs::rename(path + ".part", path);
}

torch::Tensor bytes_tensor(const std::string& text, torch::Device device) {
  auto tensor = torch::empty({static_cast<int64_t>(text.size())}, torch::kUInt8);
  std::memcpy(tensor.data_ptr(), text.data(), text.size());
  return tensor.to(device);
}

std::string tensor_text(const torch::Tensor& tensor, int64_t count) {
  const auto host = tensor.to(torch::kCPU).contiguous();
  return std::string(reinterpret_cast<const char*>(host.data_ptr()), static_cast<size_t>(count));
}

// Every rank's text, in rank order.
std::vector<std::string> all_gather_texts(parallel::Comm& world, const std::string& mine, torch::Device device) {
  const int64_t size = world.size();
  auto lengths = torch::zeros({size}, torch::kInt64).to(device);
  world.all_gather(lengths, torch::tensor({static_cast<int64_t>(mine.size())}, torch::kInt64).to(device)).wait();
  const auto host_lengths = lengths.to(torch::kCPU);
  const int64_t longest = std::max<int64_t>(1, host_lengths.max().item<int64_t>());
  std::string padded = mine;
  padded.resize(static_cast<size_t>(longest), '\0');
  auto gathered = torch::empty({size * longest}, torch::kUInt8).to(device);
  world.all_gather(gathered, bytes_tensor(padded, device)).wait();
  const std::string all = tensor_text(gathered, size * longest);
  std::vector<std::string> texts;
  for (int64_t r = 0; r < size; ++r)
    texts.push_back(all.substr(static_cast<size_t>(r * longest), static_cast<size_t>(host_lengths[r].item<int64_t>())));
  return texts;
}

// This rank's files to rank `to`, rank `from`'s back: the names and sizes first, then the bytes,
// each file a tensor of its own.
Files exchange_files(parallel::Comm& world, const Files& mine, int64_t to, int64_t from, torch::Device device) {
  using Kind = parallel::PeerTransfer::Kind;
  nlohmann::json listing = nlohmann::json::array();
  for (const auto& [name, bytes] : mine) listing.push_back({name, bytes.numel()});
  const std::string text = listing.dump();
  auto length_out = torch::tensor({static_cast<int64_t>(text.size())}, torch::kInt64).to(device);
  auto length_in = torch::zeros({1}, torch::kInt64).to(device);
  world.send_recv({{Kind::send, length_out, to}, {Kind::recv, length_in, from}}).wait();
  const int64_t length = length_in.to(torch::kCPU).item<int64_t>();
  auto listing_in = torch::empty({length}, torch::kUInt8).to(device);
  world.send_recv({{Kind::send, bytes_tensor(text, device), to}, {Kind::recv, listing_in, from}}).wait();
  Files theirs;
  std::vector<parallel::PeerTransfer> transfers;
  for (const auto& [name, bytes] : mine) transfers.push_back({Kind::send, bytes.to(device), to});
  for (const auto& entry : nlohmann::json::parse(tensor_text(listing_in, length))) {
    auto& bytes = theirs[entry[0].get<std::string>()];
    bytes = torch::empty({entry[1].get<int64_t>()}, torch::kUInt8).to(device);
    transfers.push_back({Kind::recv, bytes, from});
  }
  world.send_recv(transfers).wait();
  return theirs;
}

// What a node's folder holds of a step: name -> size.
std::map<std::string, int64_t> inventory(const std::string& folder) {
  std::map<std::string, int64_t> files;
  std::error_code error;
  if (!fs::is_directory(folder, error)) return files;
  for (const auto& entry : fs::directory_iterator(folder, error))
    if (entry.is_regular_file() && entry.path().extension() != ".part")
      files[entry.path().filename().string()] = static_cast<int64_t>(entry.file_size());
  return files;
}

struct Fetch {
  int64_t from_node, to_node;
  std::string file;
  int64_t size;
};

// For every node, each file some node holds and it lacks, from the first node holding it.
std::vector<Fetch> fetches(const std::vector<std::map<std::string, int64_t>>& held) {
  std::map<std::string, std::pair<int64_t, int64_t>> first_holder;  // file -> (node, size)
  for (int64_t node = 0; node < static_cast<int64_t>(held.size()); ++node)
    for (const auto& [file, size] : held[node]) first_holder.emplace(file, std::make_pair(node, size));
  std::vector<Fetch> plan;
  for (int64_t node = 0; node < static_cast<int64_t>(held.size()); ++node)
    for (const auto& [file, holder] : first_holder)
      if (!held[node].count(file)) plan.push_back({holder.first, node, file, holder.second});
  return plan;
}

}  // namespace

std::string node_memory_folder(const std::string& run_dir) {
  if (const char* folder = std::getenv("XTRAIN_NODE_MEMORY_DIR"); folder && *folder) return folder;
  const std::string path = fs::absolute(run_dir).lexically_normal().string();
  return "/dev/shm/xtrain-" + util::xxh3_hex(path);
}

MemoryCheckpoints::MemoryCheckpoints(std::string root, std::shared_ptr<parallel::Comm> world, int64_t ranks_per_node,
                                     torch::Device device)
    : root_(std::move(root)),
      group_(std::move(world)),
      world_(*group_),
      rank_(world_.rank()),
      size_(world_.size()),
      ranks_per_node_(ranks_per_node > 0 && size_ % ranks_per_node == 0 ? ranks_per_node : size_),
      nodes_(size_ / ranks_per_node_),
      device_(device) {}

MemoryCheckpoints::~MemoryCheckpoints() {
  if (copying_.joinable()) copying_.join();
}

double MemoryCheckpoints::wait() {
  if (copying_.joinable()) copying_.join();
  return copy_seconds_;
}

std::string MemoryCheckpoints::step_folder(int64_t step) const { return fmt::format("{}/step-{}", root_, step); }

void MemoryCheckpoints::keep(int64_t step, const std::string& folder) {
  wait();
  copying_ = std::thread([this, step, folder] { copy(step, folder); });
}

// Every rank takes part in the exchange and the barrier whatever failed before them, so that a
// failure on one rank never leaves another waiting.
void MemoryCheckpoints::copy(int64_t step, const std::string& folder) {
  const auto started = std::chrono::steady_clock::now();
  const std::string into = step_folder(step);
  std::string problem;
  auto attempt = [&problem](const std::function<void()>& work) {
    if (!problem.empty()) return;
    try {
      work();
    } catch (const std::exception& e) {
      problem = e.what();
    }
  };
  Files mine, theirs;
  attempt([&] { mine = files_written_by(rank_, folder); });
  attempt([&] {
    int64_t bytes = 0;
    for (const auto& [name, file] : mine) bytes += file.numel();
    check_room(root_, (nodes_ > 1 ? 2 : 1) * bytes,
               nodes_ > 1 ? "this rank's files and the copy it keeps for the previous node" : "this rank's files");
  });
  attempt([&] {
    for (const auto& [name, bytes] : mine) write_into(into, name, bytes);
  });
  try {
    if (nodes_ > 1) {
      const int64_t next = (rank_ + ranks_per_node_) % size_, previous = (rank_ - ranks_per_node_ + size_) % size_;
      theirs = exchange_files(world_, problem.empty() ? mine : Files{}, next, previous, device_);
    }
    attempt([&] {
      for (const auto& [name, bytes] : theirs) write_into(into, name, bytes);
    });
    world_.barrier();  // every node holds the step: the older ones can go
  } catch (const std::exception& e) {  // the group failed (a peer died): the restart reads disk
    problem = e.what();
  }
  std::error_code ignored;
  if (!problem.empty()) {
    fs::remove_all(into, ignored);  // no partial copy left to fill the node's memory
    fmt::print(stderr, "warning: step-{} was not copied to host memory ({}): {}; a restart reads it from disk\n",
               step, into, problem);
  } else if (node_leader()) {
    for (const auto& entry : fs::directory_iterator(root_, ignored))
      if (entry.path().filename() != fs::path(into).filename()) fs::remove_all(entry.path(), ignored);
  }
  copy_seconds_ = elapsed_since(started);
}

std::optional<MemoryCheckpoints::Assembled> MemoryCheckpoints::assemble(int64_t step) {
  const auto started = std::chrono::steady_clock::now();
  const std::string folder = step_folder(step);
  const auto texts = all_gather_texts(world_, node_leader() ? nlohmann::json(inventory(folder)).dump() : "", device_);
  std::vector<std::map<std::string, int64_t>> held;
  for (int64_t node = 0; node < nodes_; ++node)
    held.push_back(nlohmann::json::parse(texts[node * ranks_per_node_]).get<std::map<std::string, int64_t>>());
  if (std::all_of(held.begin(), held.end(), [](const auto& files) { return files.empty(); })) return std::nullopt;

  using Kind = parallel::PeerTransfer::Kind;
  const int64_t node = rank_ / ranks_per_node_;
  std::vector<parallel::PeerTransfer> transfers;
  std::vector<std::pair<std::string, torch::Tensor>> received;
  Assembled assembled;
  for (const auto& fetch : fetches(held)) {
    assembled.files_fetched += 1;
    assembled.bytes_fetched += fetch.size;
    if (!node_leader()) continue;
    if (fetch.from_node == node)
      transfers.push_back({Kind::send, read_bytes(folder + "/" + fetch.file).to(device_), fetch.to_node * ranks_per_node_});
    if (fetch.to_node == node) {
      received.emplace_back(fetch.file, torch::empty({fetch.size}, torch::kUInt8).to(device_));
      transfers.push_back({Kind::recv, received.back().second, fetch.from_node * ranks_per_node_});
    }
  }
  if (!transfers.empty()) world_.send_recv(transfers).wait();
  std::string problem;
  if (node_leader()) {
    try {
      for (const auto& [file, bytes] : received) write_into(folder, file, bytes);
      const auto check = ckpt::check_resumable(folder);
      assembled.verification = check.summary();
      if (!check.usable()) problem = assembled.verification;
    } catch (const std::exception& e) {
      problem = e.what();
    }
  }
  if (!problem.empty())
    fmt::print(stderr, "warning: the copy of step-{} in this node's host memory ({}) cannot be used: {}; reading "
                       "the checkpoint from disk\n", step, folder, problem);
  auto failed = torch::tensor({problem.empty() ? 0.0 : 1.0}, torch::kFloat64).to(device_);
  world_.all_reduce_sum(failed).wait();
  if (failed.to(torch::kCPU).item<double>() > 0) return std::nullopt;
  assembled.dir = folder;
  assembled.seconds = elapsed_since(started);
  return assembled;
}

void MemoryCheckpoints::remove() {
  wait();
  world_.barrier();
  std::error_code ignored;
  if (node_leader()) fs::remove_all(root_, ignored);
}

}  // namespace xtrain::train
