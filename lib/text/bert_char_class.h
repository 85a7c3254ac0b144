// The character classes of Hugging Face's BERT normalizer and pre-tokenizer, as the tokenizers
// library computes them, so that WordPiece files encode to exactly its ids. The library takes
// general categories from tables of Unicode 8.0 (the unicode_categories crate), canonical
// decompositions from tables of Unicode 9.0, and case mappings from Rust's standard library
// (Unicode 17); ICU supplies each, restricted to the characters those versions had assigned.
#pragma once
#include <string>

namespace xtrain::text::bert {

// BertNormalizer's clean_text drops these: NUL, U+FFFD, and control characters (Cc, Cf, Co)
// other than tab, line feed and carriage return.
bool is_dropped_control(char32_t c);
// BertNormalizer's clean_text makes these a plain space: tab, LF, CR and Unicode White_Space
// (the other Cc white space, such as vertical tab and U+0085, is dropped as a control first).
bool is_clean_white_space(char32_t c);
// handle_chinese_chars puts a space on either side of these: the CJK ideograph blocks
// tokenizers lists (its range for Extension E starts at U+2B920, leaving U+2B820-U+2B91F out).
bool is_chinese_char(char32_t c);
// BertPreTokenizer makes each of these its own piece: ASCII punctuation (which includes
// $ + < = > ^ ` | ~) and Unicode categories Pc, Pd, Ps, Pe, Pi, Pf, Po.
bool is_punctuation(char32_t c);
// strip_accents drops these (category Mn) from the NFD form.
bool is_nonspacing_mark(char32_t c);
// Appends the full lowercase mapping of `c`, one character at a time as Rust's
// char::to_lowercase does (Σ becomes σ wherever it stands; İ becomes i + U+0307).
void append_lowercase(std::string& out, char32_t c);
// Appends the NFD form of `text` (valid UTF-8), by the decompositions and combining classes of
// Unicode 9.0: a character assigned later is left whole and is not reordered.
void append_nfd(std::string& out, const std::string& text);

}  // namespace xtrain::text::bert
