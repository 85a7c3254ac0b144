// The encoding pipeline: documents read from files in order, parsed and encoded on several
// threads, and delivered in input order, so that the token stream is the same for any number
// of threads. Both the tokenization of a text source when a run starts and `xtrain data
// prepare` run it.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "data/document_encoder.h"
#include "data/sources/document_reader.h"

namespace xtrain::data {

struct EncodedChunk {
  std::vector<EncodedDocument> documents;
  uint64_t bytes = 0;  // of input read for them
};

// Parses and encodes the documents of one chunk, in order. Problems are InputErrors naming the
// file and line (or the file, for a text file).
EncodedChunk encode_chunk(const RawChunk& chunk, RecordForm form, const DocumentEncoder& encoder);

// Runs the reader to its end; workers < 1 means one per core.
void encode_documents(DocumentReader& reader, RecordForm form, const DocumentEncoder& encoder, int workers,
                      const std::function<void(EncodedChunk&&)>& consume);

// The threads for workers < 1: one per core.
int resolve_workers(int workers);

}  // namespace xtrain::data
