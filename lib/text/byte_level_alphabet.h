// GPT-2's byte-level alphabet (bytes_to_unicode): every byte stands for one printable code
// point, so byte-level BPE vocabularies (Hugging Face tokenizer.json) spell raw bytes as text:
// a space is "Ġ", a newline "Ċ". Bytes 0x21-0x7E, 0xA1-0xAC and 0xAE-0xFF stand for themselves;
// the other 68 map to U+0100.. in byte order.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace xtrain::text {

// The UTF-8 spelling of the code point that stands for `byte`.
const std::string& byte_level_char(unsigned char byte);
// The bytes a byte-level spelled string stands for; nullopt if a code point is outside the
// alphabet (such a vocabulary entry can never come out of byte-level pre-tokenization).
std::optional<std::string> byte_level_to_bytes(std::string_view text);

}  // namespace xtrain::text
