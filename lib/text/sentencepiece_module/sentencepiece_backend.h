// SentencePieceBackend: the part of libsentencepiece that xtrain uses, behind a virtual
// interface. Debian's libsentencepiece exports the protobuf-lite it bundles, and those symbols
// collide with the libprotobuf that LibTorch loads (a crash in static initialisation). So the
// library is linked only into a module (sentencepiece_module/) that is loaded on first use
// with a symbol scope of its own; calls cross through this vtable, and errors come back as
// strings rather than exceptions.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace xtrain::text {

class SentencePieceBackend {
 public:
  virtual ~SentencePieceBackend() = default;
  // Each returns "" on success, else the library's message.
  virtual std::string load(const std::string& serialized_model) = 0;
  virtual std::string encode(std::string_view text, std::vector<int>& ids) const = 0;
  virtual std::string decode(const std::vector<int>& ids, std::string& text) const = 0;
  virtual int piece_size() const = 0;
  virtual int eos_id() const = 0;
};

// The module's one exported function; the caller owns the result.
using CreateSentencePieceBackend = SentencePieceBackend* (*)();
constexpr const char* kCreateSentencePieceBackend = "xtrain_create_sentencepiece_backend";

}  // namespace xtrain::text
