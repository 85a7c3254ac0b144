// The loadable module behind SentencePieceBackend: the only code linked with libsentencepiece.
#include <sentencepiece_processor.h>

#include "data/sentencepiece_backend.h"

namespace {

class LibSentencePiece final : public xtrain::data::SentencePieceBackend {
 public:
  std::string load(const std::string& serialized_model) override {
    return message(processor_.LoadFromSerializedProto(serialized_model));
  }
  std::string encode(std::string_view text, std::vector<int>& ids) const override {
    return message(processor_.Encode(absl::string_view(text.data(), text.size()), &ids));
  }
  std::string decode(const std::vector<int>& ids, std::string& text) const override {
    return message(processor_.Decode(ids, &text));
  }
  int piece_size() const override { return processor_.GetPieceSize(); }
  int eos_id() const override { return processor_.eos_id(); }

 private:
  static std::string message(const sentencepiece::util::Status& status) {
    return status.ok() ? std::string() : status.ToString();
  }
  sentencepiece::SentencePieceProcessor processor_;
};

}  // namespace

extern "C" __attribute__((visibility("default"))) xtrain::data::SentencePieceBackend*
xtrain_create_sentencepiece_backend() {
  try {
    return new LibSentencePiece();
  } catch (...) {
    return nullptr;
  }
}
