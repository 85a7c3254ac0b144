#include "text/byte_level_alphabet.h"

#include <array>
#include <unordered_map>

#include "text/utf8.h"

namespace xtrain::text {

namespace {

struct Alphabet {
  std::array<std::string, 256> char_of_byte;
  std::unordered_map<char32_t, unsigned char> byte_of_char;

  Alphabet() {
    char32_t next_extra = 0x100;
    for (int byte = 0; byte < 256; ++byte) {
      const bool printable = (byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) || byte >= 0xAE;
      const char32_t code = printable ? static_cast<char32_t>(byte) : next_extra++;
      utf8::append(char_of_byte[byte], code);
      byte_of_char[code] = static_cast<unsigned char>(byte);
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet instance;
  return instance;
}

}  // namespace

const std::string& byte_level_char(unsigned char byte) { return alphabet().char_of_byte[byte]; }

std::optional<std::string> byte_level_to_bytes(std::string_view text) {
  const auto& byte_of_char = alphabet().byte_of_char;
  std::string bytes;
  for (size_t pos = 0; pos < text.size();) {
    auto it = byte_of_char.find(utf8::next(text, pos));
    if (it == byte_of_char.end()) return std::nullopt;
    bytes += static_cast<char>(it->second);
  }
  return bytes;
}

}  // namespace xtrain::text
