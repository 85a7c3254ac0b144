// A TensorBoard event file: TFRecords (length, masked CRC32C of the length, a serialized Event
// protobuf, masked CRC32C of it) appended and flushed one event at a time, so that TensorBoard
// shows a run as it goes and a crash loses nothing already written. The file starts with the
// file_version event "brain.Event:2" that TensorBoard's readers expect. The few protobuf
// messages it needs (Event, Summary, SessionLog, TensorProto) are encoded here by hand.
// A write that fails (a full disk) throws std::runtime_error "cannot write PATH: REASON" and
// leaves the file as it was before that event, so that it ends on a whole record.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace xtrain::train {

// CRC32C (Castagnoli) as TFRecords mask it: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t masked_crc32c(const void* data, size_t size);

class EventFile {
 public:
  // Creates `dir` (with parents) and a new events.out.tfevents.<microseconds>.<host>.<pid> file in it,
  // never through a symbolic link.
  explicit EventFile(const std::string& dir);
  ~EventFile();
  EventFile(const EventFile&) = delete;
  EventFile& operator=(const EventFile&) = delete;

  const std::string& path() const { return path_; }
  // Scalars of one step, by tag (TensorBoard's float simple_value).
  void scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values);
  // A text summary (TensorBoard's text plugin), shown as Markdown.
  void text(int64_t step, const std::string& tag, const std::string& text);
  // SessionLog START at `step`: TensorBoard drops the events of this and later steps that came
  // before it (a resumed or rolled-back run's curve stays one curve).
  void restart(int64_t step);

 private:
  void write_event(const std::string& payload);

  std::string path_;
  std::FILE* file_ = nullptr;
  long size_ = 0;  // bytes of whole records written
};

}  // namespace xtrain::train
