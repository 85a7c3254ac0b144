#include "text/tiktoken_tokenizer.h"

#include <algorithm>
#include <charconv>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "text/byte_pair_merge.h"
#include "util/durable_file.h"
#include "util/input_error.h"

namespace xtrain::text {

namespace {

struct Encoding {
  std::string name;
  std::string pattern;
  std::vector<std::pair<std::string, int64_t>> special_tokens;  // the first is <|endoftext|>
};

// tiktoken's patterns (tiktoken_ext/openai_public.py) in their original, non-possessive form.
const std::string kTiktokenGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const std::string kCl100kPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string kO200kPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

const std::vector<Encoding>& encodings() {
  static const std::vector<Encoding> all = {
      {"gpt2", kTiktokenGpt2Pattern, {{"<|endoftext|>", 50256}}},
      {"r50k_base", kTiktokenGpt2Pattern, {{"<|endoftext|>", 50256}}},
      {"p50k_base", kTiktokenGpt2Pattern, {{"<|endoftext|>", 50256}}},
      {"cl100k_base",
       kCl100kPattern,
       {{"<|endoftext|>", 100257},
        {"<|fim_prefix|>", 100258},
        {"<|fim_middle|>", 100259},
        {"<|fim_suffix|>", 100260},
        {"<|endofprompt|>", 100276}}},
      {"o200k_base", kO200kPattern, {{"<|endoftext|>", 199999}, {"<|endofprompt|>", 200018}}},
  };
  return all;
}

const Encoding* find_encoding(const std::string& name) {
  for (const auto& encoding : encodings())
    if (encoding.name == name) return &encoding;
  return nullptr;
}

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Standard base64 with '=' padding; nullopt if malformed.
std::optional<std::string> decode_base64(std::string_view text) {
  if (text.empty() || text.size() % 4 != 0) return std::nullopt;
  std::string bytes;
  uint32_t buffer = 0;
  int bits = 0;
  size_t padding = 0;
  for (char c : text) {
    if (c == '=') {
      ++padding;
      continue;
    }
    const int value = base64_value(c);
    if (value < 0 || padding > 0) return std::nullopt;
    buffer = (buffer << 6) | static_cast<uint32_t>(value);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      bytes.push_back(static_cast<char>((buffer >> bits) & 0xFF));
    }
  }
  if (padding > 2) return std::nullopt;
  return bytes;
}

// The ranks of a file are 0..N-1, each given once to one token: a rank beyond the file's lines
// (a gap, which would size the vocabulary by it), a rank twice or a token twice is refused.
std::vector<std::string> read_rank_file(const std::string& path) {
  const std::string text = util::read_file(path);
  const size_t lines = static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) + 1;
  std::vector<std::string> tokens;
  std::vector<size_t> line_of_rank;
  std::unordered_map<std::string, size_t> line_of_token;
  size_t line_number = 0;
  for (size_t begin = 0; begin < text.size();) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + begin, end - begin);
    begin = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    const size_t space = line.find(' ');
    auto bytes = space == std::string_view::npos ? std::nullopt : decode_base64(line.substr(0, space));
    uint32_t rank = 0;
    const char* rank_end = line.data() + line.size();
    const bool rank_ok = bytes && std::from_chars(line.data() + space + 1, rank_end, rank).ptr == rank_end &&
                         rank < (1u << 24);
    if (!rank_ok)
      throw InputError(fmt::format("{}:{}: not a tiktoken rank line (expected `<base64 token> <rank>`, got `{}`)",
                                   path, line_number, line.substr(0, 80)));
    if (rank >= lines)
      throw InputError(fmt::format("{}:{}: rank {} is beyond the {} lines of the file: the ranks of a rank file run "
                                   "from 0 without gaps",
                                   path, line_number, rank, lines));
    if (rank >= tokens.size()) {
      tokens.resize(rank + 1);
      line_of_rank.resize(rank + 1, 0);
    }
    if (line_of_rank[rank] != 0)
      throw InputError(fmt::format("{}:{}: rank {} is given again (first on line {}); each rank names one token",
                                   path, line_number, rank, line_of_rank[rank]));
    if (const auto [it, fresh] = line_of_token.emplace(*bytes, line_number); !fresh)
      throw InputError(fmt::format("{}:{}: the token `{}` is ranked again (first on line {}); each token has one rank",
                                   path, line_number, line.substr(0, space), it->second));
    line_of_rank[rank] = line_number;
    tokens[rank] = std::move(*bytes);
  }
  for (size_t rank = 0; rank < tokens.size(); ++rank)
    if (line_of_rank[rank] == 0)
      throw InputError(fmt::format("{}: no line gives rank {} (the ranks run to {}): the ranks of a rank file run "
                                   "from 0 without gaps",
                                   path, rank, tokens.size() - 1));
  return tokens;
}

}  // namespace

const std::vector<std::string>& TiktokenTokenizer::encoding_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> all;
    for (const auto& encoding : encodings()) all.push_back(encoding.name);
    return all;
  }();
  return names;
}

std::string TiktokenTokenizer::encoding_from_file_name(const std::string& path) {
  std::string stem = path.substr(path.find_last_of('/') + 1);
  stem = stem.substr(0, stem.find('.'));
  return find_encoding(stem) ? stem : "";
}

namespace {

// The encoding `name` names, or the one the file name implies when `name` is empty.
const Encoding& resolve_encoding(const std::string& path, const std::string& name) {
  const std::string known = fmt::format("{}", fmt::join(TiktokenTokenizer::encoding_names(), ", "));
  const std::string resolved = name.empty() ? TiktokenTokenizer::encoding_from_file_name(path) : name;
  if (resolved.empty())
    throw InputError(fmt::format("cannot tell the encoding of tiktoken rank file {} from its name: add it, as in "
                                 "tiktoken:{}:cl100k_base (known: {})",
                                 path, path, known));
  const Encoding* encoding = find_encoding(resolved);
  if (!encoding) throw InputError(fmt::format("unknown tiktoken encoding '{}' (known: {})", resolved, known));
  return *encoding;
}

}  // namespace

TiktokenTokenizer::TiktokenTokenizer(const std::string& path, const std::string& encoding_name)
    : pattern_(resolve_encoding(path, encoding_name).pattern) {
  const Encoding& encoding = resolve_encoding(path, encoding_name);
  ranks_ = std::make_unique<TokenRanks>(read_rank_file(path));
  for (int byte = 0; byte < 256; ++byte) {
    if (ranks_->rank(std::string(1, static_cast<char>(byte))) == TokenRanks::kNone)
      throw InputError(fmt::format("{}: byte 0x{:02X} has no rank, so this is not a byte-level BPE rank file "
                                   "(tiktoken files such as cl100k_base.tiktoken rank all 256 bytes)",
                                   path, byte));
  }
  vocab_size_ = static_cast<int64_t>(ranks_->size());
  for (const auto& [text, id] : encoding.special_tokens) {
    if (id < vocab_size_ && !ranks_->bytes(static_cast<uint32_t>(id)).empty())
      throw InputError(fmt::format("{}: rank {} is an ordinary token, but {} reserves it for {}: is this the rank "
                                   "file of another encoding?",
                                   path, id, encoding.name, text));
    vocab_size_ = std::max(vocab_size_, id + 1);
  }
  eos_id_ = encoding.special_tokens.front().second;
  name_ = "tiktoken:" + path + ":" + encoding.name;
}

void TiktokenTokenizer::encode_piece(std::string_view piece, std::vector<int64_t>& out) const {
  // A piece that is a token is that token, even when merging would split it otherwise.
  if (uint32_t rank = ranks_->rank(piece); rank != TokenRanks::kNone) {
    out.push_back(rank);
    return;
  }
  if (cache_.append(piece, out)) return;
  const size_t from = out.size();
  byte_pair_merge(piece, *ranks_, out);
  cache_.store(piece, out, from);
}

std::vector<int64_t> TiktokenTokenizer::encode(std::string_view text) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size() / 3);
  size_t covered = 0;
  pattern_.for_each_match(text, [&](TextSpan match) {
    // Bytes no match covers (only invalid UTF-8 with these patterns) are merged as a piece
    // of their own rather than dropped.
    if (match.begin > covered) encode_piece(text.substr(covered, match.begin - covered), ids);
    encode_piece(text.substr(match.begin, match.end - match.begin), ids);
    covered = match.end;
  });
  if (covered < text.size()) encode_piece(text.substr(covered), ids);
  return ids;
}

std::string TiktokenTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string text;
  for (int64_t id : ids)
    if (id >= 0 && static_cast<size_t>(id) < ranks_->size()) text += ranks_->bytes(static_cast<uint32_t>(id));
  return text;
}

}  // namespace xtrain::text
