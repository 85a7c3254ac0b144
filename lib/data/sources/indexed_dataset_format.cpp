#include "data/sources/indexed_dataset_format.h"

namespace xtrain::data {

std::optional<IndexedDType> indexed_dtype_from_code(uint8_t code) {
  if (code < 1 || code > 8) return std::nullopt;
  return static_cast<IndexedDType>(code);
}

size_t indexed_dtype_size(IndexedDType dtype) {
  switch (dtype) {
    case IndexedDType::UInt8:
    case IndexedDType::Int8: return 1;
    case IndexedDType::Int16:
    case IndexedDType::UInt16: return 2;
    case IndexedDType::Int32:
    case IndexedDType::Float32: return 4;
    case IndexedDType::Int64:
    case IndexedDType::Float64: return 8;
  }
  return 0;
}

const char* indexed_dtype_name(IndexedDType dtype) {
  switch (dtype) {
    case IndexedDType::UInt8: return "uint8";
    case IndexedDType::Int8: return "int8";
    case IndexedDType::Int16: return "int16";
    case IndexedDType::Int32: return "int32";
    case IndexedDType::Int64: return "int64";
    case IndexedDType::Float64: return "float64";
    case IndexedDType::Float32: return "float32";
    case IndexedDType::UInt16: return "uint16";
  }
  return "?";
}

bool is_integer(IndexedDType dtype) { return dtype != IndexedDType::Float32 && dtype != IndexedDType::Float64; }

IndexedDType token_dtype_for_vocab(int64_t vocab_size) {
  return vocab_size < 65500 ? IndexedDType::UInt16 : IndexedDType::Int32;
}

}  // namespace xtrain::data
