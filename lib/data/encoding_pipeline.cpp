#include "data/encoding_pipeline.h"

#include <thread>

#include "util/input_error.h"
#include "util/ordered_parallel_map.h"

namespace xtrain::data {

EncodedChunk encode_chunk(const RawChunk& chunk, RecordForm form, const DocumentEncoder& encoder) {
  EncodedChunk encoded;
  encoded.bytes = chunk.bytes;
  encoded.documents.reserve(chunk.items.size());
  for (size_t i = 0; i < chunk.items.size(); ++i) {
    const bool jsonl = chunk.first_line > 0;
    const std::string where =
        jsonl ? chunk.name + ":" + std::to_string(chunk.first_line + static_cast<int64_t>(i)) : chunk.name;
    std::optional<Document> document;
    if (jsonl)
      document = parse_jsonl_record(chunk.items[i], where, form);
    else
      document = Document{chunk.items[i], {}, false, {}};
    if (!document) continue;
    try {
      encoded.documents.push_back(encoder.encode(*document));
    } catch (const InputError& e) {
      throw InputError(where + ": " + e.what());
    }
  }
  return encoded;
}

int resolve_workers(int workers) {
  if (workers >= 1) return workers;
  return std::max(1u, std::thread::hardware_concurrency());
}

void encode_documents(DocumentReader& reader, RecordForm form, const DocumentEncoder& encoder, int workers,
                      const std::function<void(EncodedChunk&&)>& consume) {
  const int threads = resolve_workers(workers);
  // Enough chunks ahead to keep every worker busy while one slow chunk holds up the order.
  const size_t in_flight = 4 * static_cast<size_t>(threads);
  util::ordered_parallel_map<RawChunk, EncodedChunk>(
      threads, in_flight, [&] { return reader.next(); },
      [&](const RawChunk& chunk) { return encode_chunk(chunk, form, encoder); }, consume);
}

}  // namespace xtrain::data
