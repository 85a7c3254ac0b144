#include "text/sentencepiece_tokenizer.h"

#include <dlfcn.h>
#include <unistd.h>

#include <mutex>

#include <fmt/format.h>

#include "util/durable_file.h"
#include "util/input_error.h"

namespace xtrain::text {

namespace {

const char* const kModuleName = "xtrain_sentencepiece.so";

std::string executable_folder() {
  char buffer[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  if (n <= 0) return ".";
  const std::string path(buffer, static_cast<size_t>(n));
  return path.substr(0, path.find_last_of('/'));
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

// Loads the module once: beside the executable, else where the build put it.
CreateSentencePieceBackend module_factory() {
  // RTLD_DEEPBIND: the module and libsentencepiece resolve their own (protobuf) symbols first;
  // RTLD_LOCAL keeps them out of LibTorch's way. The sanitizer runtimes refuse DEEPBIND; their
  // builds (the fuzz targets) link no LibTorch, so there is no protobuf to avoid.
  constexpr int kModuleFlags = RTLD_NOW | RTLD_LOCAL | (kAddressSanitizer ? 0 : RTLD_DEEPBIND);
  static std::once_flag once;
  static CreateSentencePieceBackend factory = nullptr;
  static std::string failure;
  std::call_once(once, [] {
    std::string errors;
    for (const std::string& path : {executable_folder() + "/" + kModuleName, std::string(XTRAIN_SENTENCEPIECE_MODULE)}) {
      void* handle = ::dlopen(path.c_str(), kModuleFlags);
      if (!handle) {
        errors += fmt::format("\n  {}", ::dlerror());
        continue;
      }
      factory = reinterpret_cast<CreateSentencePieceBackend>(::dlsym(handle, kCreateSentencePieceBackend));
      if (factory) return;
      errors += fmt::format("\n  {}: no {}", path, kCreateSentencePieceBackend);
    }
    failure = "cannot load xtrain's SentencePiece module (is libsentencepiece0 installed?):" + errors;
  });
  if (!factory) throw std::runtime_error(failure);
  return factory;
}

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& path) : path_(path) {
  // Read the file ourselves so that a missing file gets the same message as everywhere else.
  const std::string model = util::read_file(path);
  backend_.reset(module_factory()());
  if (!backend_) throw std::runtime_error("cannot create a SentencePiece processor");
  if (const std::string error = backend_->load(model); !error.empty())
    throw InputError(fmt::format("{}: not a SentencePiece model ({}); data.tokenizer sentencepiece:PATH takes the "
                                 ".model file that spm_train writes",
                                 path, error));
  // libsentencepiece loads some damaged models that then fail on every text: refuse them here,
  // not in the middle of tokenizing a dataset.
  (void)encode("Probe text: 123, äö 東京.");
  if (backend_->eos_id() < 0)
    throw InputError(fmt::format("{}: the SentencePiece model has no end-of-sequence piece, which separates "
                                 "documents; train it with --eos_id set (the default is 2)",
                                 path));
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::vector<int64_t> SentencePieceTokenizer::encode(std::string_view text) const {
  std::vector<int> ids;
  if (const std::string error = backend_->encode(text, ids); !error.empty())
    throw InputError(fmt::format("{}: the SentencePiece model cannot encode text ({}); the file is damaged: "
                                 "use the .model file that came with the model, or train it again with spm_train",
                                 path_, error));
  return {ids.begin(), ids.end()};
}

std::string SentencePieceTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::vector<int> known;
  known.reserve(ids.size());
  for (int64_t id : ids)
    if (id >= 0 && id < vocab_size()) known.push_back(static_cast<int>(id));
  std::string text;
  if (const std::string error = backend_->decode(known, text); !error.empty())
    throw InputError(fmt::format("{}: the SentencePiece model cannot decode ids ({}); the file is damaged: "
                                 "use the .model file that came with the model, or train it again with spm_train",
                                 path_, error));
  return text;
}

int64_t SentencePieceTokenizer::vocab_size() const { return backend_->piece_size(); }

int64_t SentencePieceTokenizer::eos_id() const { return backend_->eos_id(); }

}  // namespace xtrain::text
