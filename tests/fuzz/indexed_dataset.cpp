// The Megatron .idx/.bin reader on arbitrary pairs of files. A dataset that opens only hands
// out views inside its .bin: every sequence and document, whatever the index says.
#include <fuzzer/FuzzedDataProvider.h>

#include "data/sources/indexed_dataset.h"
#include "fuzz_input.h"

namespace {

void require_inside(const xtrain::data::TokenView& view, const xtrain::data::TokenView& all) {
  const size_t width = xtrain::data::indexed_dtype_size(all.dtype());
  const auto* begin = static_cast<const uint8_t*>(view.data());
  const auto* first = static_cast<const uint8_t*>(all.data());
  xtrain::fuzz::require(view.size() >= 0 && view.size() <= all.size(), "a view is no larger than the .bin");
  xtrain::fuzz::require(view.size() == 0 || (begin >= first && begin + view.size() * width <= first + all.size() * width),
                        "a view lies inside the .bin");
  if (view.size() > 0) (void)(view[0] + view[view.size() - 1]);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace xtrain;
  FuzzedDataProvider input(data, size);
  const std::string bin = input.ConsumeBytesAsString(input.ConsumeIntegralInRange<size_t>(0, 4096));
  const std::string idx = input.ConsumeRemainingBytesAsString();
  const std::string prefix = fuzz::scratch_dir() + "/tokens";
  fuzz::write_input("tokens.bin", bin);
  fuzz::write_input("tokens.idx", idx);
  fuzz::expect_only_input_errors([&] {
    const data::IndexedDataset dataset(prefix);
    const data::TokenView all = dataset.tokens();
    fuzz::require(all.size() * static_cast<int64_t>(data::indexed_dtype_size(dataset.dtype())) ==
                      static_cast<int64_t>(bin.size()),
                  "the .bin holds exactly num_tokens ids");
    for (int64_t i = 0; i < dataset.num_sequences(); ++i) require_inside(dataset.sequence(i), all);
    for (int64_t d = 0; d < dataset.num_documents(); ++d) require_inside(dataset.document(d), all);
  });
  return 0;
}
