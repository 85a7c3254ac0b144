#include "train/event_file.h"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>

#include "util/posix_file.h"

namespace xtrain::train {
namespace {

const std::array<uint32_t, 256>& crc32c_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t crc = i;
      for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1) ? 0x82F63B78u : 0u);
      t[i] = crc;
    }
    return t;
  }();
  return table;
}

// Protobuf wire encoding: varints, tags (field << 3 | wire type), length-delimited fields.
void put_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}
void put_tag(std::string& out, int field, int wire_type) { put_varint(out, static_cast<uint64_t>(field << 3 | wire_type)); }
void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_tag(out, field, 2);
  put_varint(out, bytes.size());
  out += bytes;
}
template <typename T>
void put_fixed(std::string& out, int field, T value) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8);
  put_tag(out, field, sizeof(T) == 8 ? 1 : 5);
  char raw[sizeof(T)];
  std::memcpy(raw, &value, sizeof(T));  // little-endian hosts only, as x86 and ARM Linux are
  out.append(raw, sizeof(T));
}

// Event { double wall_time = 1; int64 step = 2; oneof { string file_version = 3; Summary summary
// = 5; SessionLog session_log = 7; } }, the oneof's field given encoded.
std::string event(int64_t step, int field, const std::string& body) {
  std::string out;
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  put_fixed(out, 1, now);
  put_tag(out, 2, 0);
  put_varint(out, static_cast<uint64_t>(step));
  put_bytes(out, field, body);
  return out;
}

constexpr int kFileVersion = 3, kSummary = 5, kSessionLog = 7;

}  // namespace

uint32_t masked_crc32c(const void* data, size_t size) {
  const auto& table = crc32c_table();
  uint32_t crc = 0xFFFFFFFFu;
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) crc = table[(crc ^ bytes[i]) & 0xFF] ^ (crc >> 8);
  crc ^= 0xFFFFFFFFu;
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

EventFile::EventFile(const std::string& dir) {
  std::filesystem::create_directories(dir);
  char host[256] = "localhost";
  gethostname(host, sizeof(host) - 1);
  // TensorBoard reads a folder's files in name order, which must be the sessions' order (a
  // later session's restart purges what came before it): microseconds, of a fixed width.
  const auto microseconds = std::chrono::duration_cast<std::chrono::microseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count();
  path_ = fmt::format("{}/events.out.tfevents.{:016d}.{}.{}", dir, microseconds, host, getpid());
  const int fd = util::OutputFile::create(path_, util::FileMode::create_new).release();
  file_ = ::fdopen(fd, "wb");
  if (!file_) {
    ::close(fd);
    throw std::runtime_error(fmt::format("cannot write {}: {}", path_, std::strerror(errno)));
  }
  // Unbuffered: each record goes out in one write, and a failed one is cut off right away.
  std::setvbuf(file_, nullptr, _IONBF, 0);
  try {
    write_event(event(0, kFileVersion, "brain.Event:2"));
  } catch (...) {
    // The destructor does not run for a constructor that throws; an empty file is of no use.
    std::fclose(file_);
    std::remove(path_.c_str());
    throw;
  }
}

EventFile::~EventFile() {
  if (file_) std::fclose(file_);
}

void EventFile::write_event(const std::string& payload) {
  const uint64_t length = payload.size();
  char header[12];
  std::memcpy(header, &length, 8);
  const uint32_t length_crc = masked_crc32c(header, 8);
  std::memcpy(header + 8, &length_crc, 4);
  const uint32_t payload_crc = masked_crc32c(payload.data(), payload.size());
  std::string record(header, sizeof(header));
  record += payload;
  record.append(reinterpret_cast<const char*>(&payload_crc), 4);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size() || std::fflush(file_) != 0) {
    const int error = errno;
    std::clearerr(file_);
    // A torn record would end the file for TensorBoard's reader; the whole ones before it stay.
    if (::ftruncate(::fileno(file_), size_) == 0) std::fseek(file_, size_, SEEK_SET);
    throw std::runtime_error(fmt::format("cannot write {}: {}", path_, std::strerror(error)));
  }
  size_ += static_cast<long>(record.size());
}

void EventFile::scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values) {
  std::string summary;
  for (const auto& [tag, value] : values) {
    std::string item;  // Summary.Value { string tag = 1; float simple_value = 2; }
    put_bytes(item, 1, tag);
    put_fixed(item, 2, static_cast<float>(value));
    put_bytes(summary, 1, item);
  }
  write_event(event(step, kSummary, summary));
}

void EventFile::text(int64_t step, const std::string& tag, const std::string& text) {
  std::string plugin, metadata, tensor, item, summary;
  put_bytes(plugin, 1, "text");       // PluginData { string plugin_name = 1; }
  put_bytes(metadata, 1, plugin);     // SummaryMetadata { PluginData plugin_data = 1; }
  put_tag(tensor, 1, 0);              // TensorProto { DataType dtype = 1 (DT_STRING = 7);
  put_varint(tensor, 7);
  put_bytes(tensor, 2, "");           //   TensorShapeProto tensor_shape = 2 (a scalar);
  put_bytes(tensor, 8, text);         //   repeated bytes string_val = 8; }
  put_bytes(item, 1, tag);            // Summary.Value { tag = 1; TensorProto tensor = 8;
  put_bytes(item, 8, tensor);         //   SummaryMetadata metadata = 9; }
  put_bytes(item, 9, metadata);
  put_bytes(summary, 1, item);
  write_event(event(step, kSummary, summary));
}

void EventFile::restart(int64_t step) {
  std::string session;  // SessionLog { SessionStatus status = 1 (START = 1); }
  put_tag(session, 1, 0);
  put_varint(session, 1);
  write_event(event(step, kSessionLog, session));
}

}  // namespace xtrain::train
