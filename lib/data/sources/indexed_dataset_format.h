// The layout of Megatron-LM's indexed datasets (megatron/core/datasets/indexed_dataset.py:
// _INDEX_HEADER, DType, _IndexWriter, _IndexReader), shared by the reader and the writer.
// PREFIX.bin holds the token ids back to back; PREFIX.idx describes them, little-endian:
//   char[9]  "MMIDIDX\0\0"
//   uint64   version, 1
//   uint8    dtype code of the ids (IndexedDType)
//   uint64   S, the number of sequences
//   uint64   D, the number of document_index entries: the documents + 1
//   int32    sizes[S]            ids per sequence
//   int64    pointers[S]         byte offset of each sequence in .bin (cumulative sizes)
//   int64    document_index[D]   0, then the index of the sequence after each document (last: S)
// A document is one or more sequences (Megatron splits documents into sentences on request);
// xtrain writes one sequence per document. Megatron's multimodal files append int8 modes[S],
// which xtrain ignores.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace xtrain::data {

// Megatron's DType codes.
enum class IndexedDType : uint8_t {
  UInt8 = 1,
  Int8 = 2,
  Int16 = 3,
  Int32 = 4,
  Int64 = 5,
  Float64 = 6,
  Float32 = 7,
  UInt16 = 8,
};

constexpr char kIndexMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr uint64_t kIndexVersion = 1;
// magic + version + dtype code + sequence count + document index count.
constexpr size_t kIndexHeaderBytes = 9 + 8 + 1 + 8 + 8;

std::optional<IndexedDType> indexed_dtype_from_code(uint8_t code);
size_t indexed_dtype_size(IndexedDType dtype);
const char* indexed_dtype_name(IndexedDType dtype);  // numpy's name: "uint16"
bool is_integer(IndexedDType dtype);
// The dtype Megatron's tools/preprocess_data.py picks (DType.optimal_dtype): uint16 for a
// vocabulary below 65500 ids, else int32.
IndexedDType token_dtype_for_vocab(int64_t vocab_size);

inline std::string index_path(const std::string& prefix) { return prefix + ".idx"; }
inline std::string data_path(const std::string& prefix) { return prefix + ".bin"; }

}  // namespace xtrain::data
