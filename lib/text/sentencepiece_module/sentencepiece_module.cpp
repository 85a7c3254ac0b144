// The loadable module behind SentencePieceBackend: the only code linked with libsentencepiece.
#include <sentencepiece_processor.h>

#include "text/sentencepiece_module/sentencepiece_backend.h"

namespace {

// libsentencepiece reports most problems as a Status, but some damaged models make it throw
// (its Darts trie builder does): every call turns both into the message the interface returns.
template <class Call>
std::string guarded(Call&& call) {
  try {
    const sentencepiece::util::Status status = call();
    return status.ok() ? std::string() : status.ToString();
  } catch (const std::exception& e) {
    return std::string("libsentencepiece threw: ") + e.what();
  } catch (...) {
    return "libsentencepiece threw an unknown exception";
  }
}

class LibSentencePiece final : public xtrain::text::SentencePieceBackend {
 public:
  std::string load(const std::string& serialized_model) override {
    return guarded([&] { return processor_.LoadFromSerializedProto(serialized_model); });
  }
  std::string encode(std::string_view text, std::vector<int>& ids) const override {
    return guarded([&] { return processor_.Encode(absl::string_view(text.data(), text.size()), &ids); });
  }
  std::string decode(const std::vector<int>& ids, std::string& text) const override {
    return guarded([&] { return processor_.Decode(ids, &text); });
  }
  int piece_size() const override { return processor_.GetPieceSize(); }
  int eos_id() const override { return processor_.eos_id(); }

 private:
  sentencepiece::SentencePieceProcessor processor_;
};

}  // namespace

extern "C" __attribute__((visibility("default"))) xtrain::text::SentencePieceBackend*
xtrain_create_sentencepiece_backend() {
  try {
    return new LibSentencePiece();
  } catch (...) {
    return nullptr;
  }
}
