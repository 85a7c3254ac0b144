#include "model/layers/keyed_dropout.h"

#include <cmath>

#include <ATen/ATen.h>

namespace xtrain::model {
namespace {

constexpr int64_t kLow32 = 0xffffffffLL;

// SplitMix64's finaliser: the host part of the key, (seed, step, layer, site), in 32 bits.
uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

int64_t host_key(const DropoutKey& key, int64_t layer, DropoutSite site) {
  uint64_t h = splitmix64(key.seed);
  h = splitmix64(h ^ static_cast<uint64_t>(key.step));
  h = splitmix64(h ^ static_cast<uint64_t>(layer));
  h = splitmix64(h ^ static_cast<uint64_t>(site));
  return static_cast<int64_t>(h & 0xffffffffULL);
}

// A bijection of [0, 2^32) (xorshifts and odd multipliers below 2^31, so every product of a
// value below 2^32 stays below 2^63), two rounds.
at::Tensor mix(at::Tensor x) {
  for (int round = 0; round < 2; ++round) {
    x = x.bitwise_xor(x.bitwise_right_shift(16));
    x = x.mul(0x7feb352dLL).bitwise_and(kLow32);
    x = x.bitwise_xor(x.bitwise_right_shift(15));
    x = x.mul(0x1b873593LL).bitwise_and(kLow32);
    x = x.bitwise_xor(x.bitwise_right_shift(16));
  }
  return x;
}

// The hash of each token's identity, folded into `seed` (a value below 2^32): int64 [B, T].
at::Tensor token_hash(const at::Tensor& tokens, int64_t seed) {
  const auto low = tokens.bitwise_and(kLow32), high = tokens.bitwise_right_shift(32).bitwise_and(kLow32);
  return mix(mix(low.bitwise_xor(seed)).bitwise_xor(high));
}

// Kept where the hash is at least p * 2^32.
at::Tensor keep(const at::Tensor& hash, double p) {
  return hash.ge(static_cast<int64_t>(std::llround(p * 4294967296.0)));
}

at::Tensor apply(const at::Tensor& x, const at::Tensor& keep_mask, double p) {
  return x * keep_mask.to(x.scalar_type()) * (1.0 / (1.0 - p));
}

}  // namespace

DropoutSite adapter_site(std::string_view module) {
  uint32_t hash = 2166136261u;
  for (const char c : module) hash = (hash ^ static_cast<uint8_t>(c)) * 16777619u;
  return static_cast<DropoutSite>((int64_t{1} << 32) + hash);
}

DropoutKey DropoutKey::rows_of(int64_t positions) const {
  if (!defined()) return *this;
  const auto rows = tokens.narrow(1, 0, 1);
  return {seed, step, rows * positions + at::arange(positions, tokens.options())};
}

at::Tensor hidden_keep_mask(const DropoutKey& key, int64_t layer, DropoutSite site, int64_t features,
                            int64_t feature_offset, double p) {
  const auto tokens = token_hash(key.tokens, host_key(key, layer, site)).unsqueeze(-1);  // [B, T, 1]
  const auto feature = at::arange(feature_offset, feature_offset + features, key.tokens.options());
  return keep(mix(tokens.bitwise_xor(feature)), p);
}

at::Tensor attention_keep_mask(const DropoutKey& queries, const DropoutKey& keys, int64_t layer, int64_t heads,
                               int64_t head_offset, double p) {
  const int64_t b = queries.tokens.size(0), t = queries.tokens.size(1), s = keys.tokens.size(1);
  const int64_t site = host_key(queries, layer, DropoutSite::attention_probs);
  const auto head = at::arange(head_offset, head_offset + heads, queries.tokens.options()).view({1, heads, 1, 1});
  const auto query = mix(token_hash(queries.tokens, site).view({b, 1, t, 1}).bitwise_xor(head));  // [B, H, T, 1]
  // The key token's hash under another seed, so that (query a, key b) and (b, a) differ.
  const auto key = token_hash(keys.tokens, site ^ 0x5bd1e995LL).view({b, 1, 1, s});
  return keep(mix(query.bitwise_xor(key)), p);
}

at::Tensor attention_keep_mask(const DropoutKey& key, int64_t layer, int64_t heads, int64_t head_offset, double p) {
  return attention_keep_mask(key, key, layer, heads, head_offset, p);
}

at::Tensor hidden_dropout(const at::Tensor& x, double p, const DropoutKey& key, int64_t layer, DropoutSite site,
                          int64_t feature_offset) {
  if (p <= 0 || !key.defined()) return x;
  return apply(x, hidden_keep_mask(key, layer, site, x.size(-1), feature_offset, p), p);
}

at::Tensor attention_dropout(const at::Tensor& probs, double p, const DropoutKey& key, int64_t layer,
                             int64_t head_offset) {
  if (p <= 0 || !key.defined()) return probs;
  return apply(probs, attention_keep_mask(key, layer, probs.size(1), head_offset, p), p);
}

}  // namespace xtrain::model
