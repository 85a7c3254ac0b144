// A Hugging Face tokenizer.json: where it lies (the file, or a folder holding one), its JSON,
// the entries of its added_tokens, and the Tokenizer that its model type takes: byte-level BPE
// (hf_bpe_tokenizer.h) or WordPiece (wordpiece_tokenizer.h). Errors are InputErrors naming the
// file and the part at fault.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "text/added_token_matcher.h"
#include "text/tokenizer.h"
#include "text/unicode_normalizer.h"

namespace xtrain::text {

// Ids index tables of token texts: a hostile id must not size one. Real vocabularies have a few
// hundred thousand ids.
constexpr int64_t kMaxHfTokenId = (int64_t{1} << 24) - 1;

// `path` itself, or path/tokenizer.json when `path` is a folder.
std::string hf_tokenizer_json_path(const std::string& path);

// The parsed file; InputError when it cannot be read or is not JSON.
nlohmann::json read_hf_tokenizer_json(const std::string& json_path);

// One entry of added_tokens. Throws std::invalid_argument when it is malformed, its id is
// outside 0..kMaxHfTokenId, or it sets single_word (not supported).
AddedToken parse_added_token(const nlohmann::json& entry);

// The ids of `text` as the library encodes them around added tokens: those matched in the raw
// text become their ids, the text between them is normalised, those matched in the normalised
// text become theirs, and encode_segment (pre-tokenizer and model) appends the rest's.
void encode_around_added_tokens(std::string_view text, const AddedTokenMatcher& raw_added,
                                const UnicodeNormalizer& normalizer, const AddedTokenMatcher& normalized_added,
                                const std::function<void(std::string_view, std::vector<int64_t>&)>& encode_segment,
                                std::vector<int64_t>& ids);

// The tokenizer for `path` (a tokenizer.json or a folder holding one), by its model.type.
std::unique_ptr<Tokenizer> make_hf_tokenizer(const std::string& path);

}  // namespace xtrain::text
