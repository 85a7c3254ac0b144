// Megatron indexed datasets. The layout checked here is that of Megatron-LM's
// megatron/core/datasets/indexed_dataset.py (NVIDIA/Megatron-LM, compared at commit 00caa53):
// _INDEX_HEADER b"MMIDIDX\x00\x00"; _IndexWriter.__enter__ writes the header, struct.pack("<Q", 1)
// and struct.pack("<B", dtype code); _IndexWriter.write writes "<Q" sequence count, "<Q"
// len(document_indices), then sizes as int32, pointers as int64 (_sequence_pointers: the
// cumulative byte offsets) and document_indices as int64; IndexedDatasetBuilder starts
// document_indices at [0] and appends len(sequence_lengths) per add_document. DType codes:
// uint8 1, int8 2, int16 3, int32 4, int64 5, float64 6, float32 7, uint16 8. The integration
// test data_prepare also compares xtrain's files byte for byte with ones written by numpy
// (tools/data/indexed_dataset_reference.py).
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/sources/indexed_dataset.h"
#include "data/indexed_dataset_writer.h"
#include "scratch_dir.h"
#include "util/input_error.h"

using namespace xtrain::data;
using xtrain::InputError;
using xtrain::testing::ScratchDir;

namespace {

const std::vector<std::vector<int64_t>> kDocuments = {{5, 6, 7}, {}, {65535, 0}, {42}};

std::string write_documents(const ScratchDir& dir, const std::string& name, IndexedDType dtype,
                            const std::vector<std::vector<int64_t>>& documents = kDocuments) {
  const std::string prefix = (dir.path() / name).string();
  IndexedDatasetWriter writer(prefix, dtype);
  for (const auto& document : documents) writer.add_document(document);
  writer.finish();
  return prefix;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

template <class T>
std::string raw(std::initializer_list<T> values) {
  std::string bytes;
  for (T value : values) bytes.append(reinterpret_cast<const char*>(&value), sizeof(T));
  return bytes;
}

}  // namespace

TEST_CASE("indexed dataset: written documents read back identically, in every integer dtype", "[data]") {
  ScratchDir dir;
  for (auto dtype : {IndexedDType::UInt16, IndexedDType::Int32, IndexedDType::Int64}) {
    INFO(indexed_dtype_name(dtype));
    const IndexedDataset dataset(write_documents(dir, indexed_dtype_name(dtype), dtype));
    CHECK(dataset.dtype() == dtype);
    CHECK(dataset.num_documents() == 4);
    CHECK(dataset.num_sequences() == 4);
    CHECK(dataset.num_tokens() == 6);
    for (int64_t d = 0; d < 4; ++d) {
      CHECK(dataset.document(d).to_vector() == kDocuments[static_cast<size_t>(d)]);
      CHECK(dataset.sequence(d).to_vector() == kDocuments[static_cast<size_t>(d)]);
      CHECK(dataset.document_sequences(d) == std::pair<int64_t, int64_t>{d, d + 1});
    }
    CHECK(dataset.tokens().to_vector() == std::vector<int64_t>{5, 6, 7, 65535, 0, 42});
    CHECK(dataset.tokens().slice(2, 3).to_vector() == std::vector<int64_t>{7, 65535, 0});
    CHECK(dataset.tokens()[5] == 42);
  }
  // Views are zero-copy: they point into the mapped .bin.
  const IndexedDataset dataset(write_documents(dir, "view", IndexedDType::UInt16));
  CHECK(*static_cast<const uint16_t*>(dataset.document(2).data()) == 65535);
  CHECK(dataset.document(3).data() == static_cast<const uint8_t*>(dataset.tokens().data()) + 5 * 2);
}

TEST_CASE("indexed dataset: the files are Megatron's layout, byte for byte", "[data]") {
  ScratchDir dir;
  const std::string prefix = write_documents(dir, "layout", IndexedDType::UInt16, {{1, 2, 3}, {258}});
  const std::string expected_index = std::string("MMIDIDX\0\0", 9) + raw<uint64_t>({1}) + raw<uint8_t>({8}) +
                                     raw<uint64_t>({2}) + raw<uint64_t>({3}) + raw<int32_t>({3, 1}) +
                                     raw<int64_t>({0, 6}) + raw<int64_t>({0, 1, 2});
  CHECK(read_bytes(prefix + ".idx") == expected_index);
  CHECK(read_bytes(prefix + ".bin") == raw<uint16_t>({1, 2, 3, 258}));
  CHECK(token_dtype_for_vocab(65499) == IndexedDType::UInt16);
  CHECK(token_dtype_for_vocab(65500) == IndexedDType::Int32);
}

TEST_CASE("indexed dataset: documents of several sequences, as Megatron writes split sentences", "[data]") {
  ScratchDir dir;
  const std::string prefix = (dir.path() / "sentences").string();
  // Three sequences: document 0 = sequences 0 and 1, document 1 = sequence 2.
  write_bytes(prefix + ".idx", std::string("MMIDIDX\0\0", 9) + raw<uint64_t>({1}) + raw<uint8_t>({4}) +
                                   raw<uint64_t>({3}) + raw<uint64_t>({3}) + raw<int32_t>({2, 1, 2}) +
                                   raw<int64_t>({0, 8, 12}) + raw<int64_t>({0, 2, 3}));
  write_bytes(prefix + ".bin", raw<int32_t>({10, 11, 12, 20, 21}));
  const IndexedDataset dataset(prefix);
  CHECK(dataset.num_documents() == 2);
  CHECK(dataset.document(0).to_vector() == std::vector<int64_t>{10, 11, 12});
  CHECK(dataset.document(1).to_vector() == std::vector<int64_t>{20, 21});
  CHECK(dataset.sequence(1).to_vector() == std::vector<int64_t>{12});
}

TEST_CASE("indexed dataset: malformed files are input errors naming the file", "[data]") {
  ScratchDir dir;
  const std::string good = write_documents(dir, "good", IndexedDType::Int32);
  const std::string index = read_bytes(good + ".idx");
  const std::string data = read_bytes(good + ".bin");
  auto broken = [&](const std::string& name, const std::string& idx, const std::string& bin) {
    const std::string prefix = (dir.path() / name).string();
    write_bytes(prefix + ".idx", idx);
    write_bytes(prefix + ".bin", bin);
    return prefix;
  };
  auto problem = [](const std::string& prefix) -> std::string {
    try {
      IndexedDataset dataset(prefix);
    } catch (const InputError& e) {
      return e.what();
    }
    return "no error";
  };

  std::string bad_magic = index;
  bad_magic[0] = 'X';
  CHECK_THAT(problem(broken("magic", bad_magic, data)),
             Catch::StartsWith((dir.path() / "magic.idx").string() + ": not a Megatron indexed dataset"));

  std::string version = index;
  version[9] = 2;
  CHECK_THAT(problem(broken("version", version, data)), Catch::Contains("version.idx: index version 2"));

  std::string dtype = index;
  dtype[17] = 9;
  CHECK_THAT(problem(broken("dtype", dtype, data)), Catch::Contains("dtype.idx: unknown dtype code 9"));

  CHECK_THAT(problem(broken("truncated", index.substr(0, index.size() - 4), data)),
             Catch::Contains("truncated.idx: truncated"));
  CHECK_THAT(problem(broken("header", index.substr(0, 20), data)), Catch::Contains("header.idx: truncated: 20 bytes"));

  // The sizes claim more ids than the .bin holds.
  CHECK_THAT(problem(broken("short_bin", index, data.substr(0, data.size() - 4))),
             Catch::Contains("short_bin.bin: 20 bytes, but") && Catch::Contains("describes 6 int32 ids (24 bytes)"));

  std::string sizes = index;
  const int32_t huge = 1000;
  std::memcpy(&sizes[34], &huge, 4);  // sizes[0]
  CHECK_THAT(problem(broken("sizes", sizes, data)), Catch::Contains("sizes.idx: sequence 1 starts at byte 12"));

  std::string documents = index;
  const int64_t wrong = 3;
  std::memcpy(&documents[documents.size() - 8], &wrong, 8);  // the last document index entry
  CHECK_THAT(problem(broken("documents", documents, data)), Catch::Contains("documents.idx: the document index ends"));

  const std::string missing = (dir.path() / "only_idx").string();
  write_bytes(missing + ".idx", index);
  CHECK_THAT(problem(missing), Catch::Contains("only_idx.bin: cannot open"));
}

TEST_CASE("indexed dataset writer: ids must fit the dtype; nothing is left without finish()", "[data]") {
  ScratchDir dir;
  const std::string prefix = (dir.path() / "partial").string();
  {
    IndexedDatasetWriter writer(prefix, IndexedDType::UInt16);
    writer.add_document({1, 2});
    CHECK_THROWS_AS(writer.add_document({65536}), std::out_of_range);
    CHECK_THROWS_AS(writer.add_document({-1}), std::out_of_range);
    CHECK(writer.num_documents() == 1);
  }
  CHECK(std::filesystem::is_empty(dir.path()));
}
