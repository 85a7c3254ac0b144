// The tiles of causal attention between some query tokens and some key tokens of one row, each
// side given as spans of the row (model/layers/sequence_layout.h), with an online softmax: the engine
// of the blockwise kernel (every token on both sides) and of ring attention (this rank's
// queries against another rank's keys).
//
// Tensors are grouped by kv head: qs [B, KV, G, Tq, D] holds q times the softmax scale in the
// matmul dtype, k [B, KV, Tk, D] and v [B, KV, Tk, Dv] (Dv may differ from D); statistics and
// accumulators are in the stats dtype (fp32 or wider). A query sees the keys at or before its
// row position in its own document (bounds: the row's cu_seqlens, [0, row_length] for one
// sequence) and, with a window w > 0, only those less than w positions before it. Tiles with no
// visible pair are skipped, so a window's cost is linear in the row; tiles wholly visible are
// not masked. Sinks (model::AttentionVariant) are not part of the tiles: add_sinks joins them
// to the finished (out, lse) of the whole attention, once.
#pragma once
#include <cstdint>
#include <vector>

#include <torch/types.h>

#include "model/layers/sequence_layout.h"

namespace xtrain::model {

class SpanTiles {
 public:
  SpanTiles(const std::vector<TokenSpan>& queries, const std::vector<TokenSpan>& keys, const std::vector<int64_t>& bounds,
            int64_t block, const torch::Device& device, int64_t window = 0);

  struct Tile {
    int64_t local;   // first token in the side's local order
    int64_t row;     // its row position
    int64_t length;
  };
  const std::vector<Tile>& query_tiles() const { return queries_; }
  const std::vector<Tile>& key_tiles() const { return keys_; }
  bool skipped(const Tile& q, const Tile& k) const;
  // !skipped(q, k), counting the pairs it lets through: attend_tiles and its backward ask it
  // before computing a tile, so visited() is the number of tiles they computed.
  bool visits(const Tile& q, const Tile& k) const;
  int64_t visited() const { return visited_; }
  // [q.length, k.length] bool, true where the query may not see the key; undefined when every
  // pair is visible.
  torch::Tensor hidden(const Tile& q, const Tile& k) const;
  // Whether the pair of sides has any visible pair at all.
  bool any_visible() const;

 private:
  std::vector<Tile> queries_, keys_;
  std::vector<int64_t> bounds_;
  int64_t window_ = 0;
  mutable int64_t visited_ = 0;
  std::vector<int64_t> doc_;  // document of each row position
  torch::TensorOptions index_options_;
  torch::Tensor doc_ids_;     // the same on the device, with more than one document
};

// Attention of the queries over these keys alone. out [B, KV, G, Tq, Dv] (stats dtype) and lse
// [B, KV, G, Tq] are written; a query that sees none of the keys gets out 0 and lse -inf.
void attend_tiles(const SpanTiles& tiles, const torch::Tensor& qs, const torch::Tensor& k, const torch::Tensor& v,
                  torch::Tensor& out, torch::Tensor& lse);

// Backward of the same tiles given the whole attention's lse and delta (rowsum(dO * O))
// [B, KV, G, Tq] and dout [B, KV, G, Tq, Dv] (matmul dtype): adds to dq (stats dtype, like qs,
// still to be multiplied by the scale), dk and dv (stats dtype, like k and v). With sinks, lse
// is the one add_sinks made: the tiles' probabilities are then the ones the output used.
void attend_tiles_backward(const SpanTiles& tiles, const torch::Tensor& qs, const torch::Tensor& dout,
                           const torch::Tensor& lse, const torch::Tensor& delta, const torch::Tensor& k,
                           const torch::Tensor& v, torch::Tensor& dq, torch::Tensor& dk, torch::Tensor& dv);

// q [B, H, T, D] as the tiles take it: times `scale` in the stats dtype, back in q's dtype,
// grouped [B, KV, G, T, D].
torch::Tensor scaled_queries(const torch::Tensor& q, int64_t kv_heads, torch::ScalarType stats_type, double scale);

// What a backward over tiles reads beside k and v, from the saved q and output and the output's
// gradient: the scaled queries, dout grouped in q's dtype, delta = rowsum(dO * O) (the term of
// the softmax Jacobian shared by a whole row) and dq's accumulator, zeros, in the stats dtype.
struct TileBackward {
  torch::Tensor qs, dout, delta, dq;
  double scale = 0;
  // dq [B, H, T, D] in q's dtype, the scale applied (dk used the scaled q already).
  torch::Tensor query_gradient(const torch::Tensor& q) const;
};
TileBackward tile_backward(const torch::Tensor& q, int64_t kv_heads, const torch::Tensor& output,
                           const torch::Tensor& grad, torch::ScalarType stats_type, double scale);

// Joins per-head sink logits sinks [H] to a finished attention: out [B, H, T, Dv] and lse
// [B, H, T] (stats dtype, in place) become the softmax over the keys and the sink column, whose
// value is zero. A row that saw no key keeps out 0 and gets lse = its sink.
void add_sinks(const torch::Tensor& out, const torch::Tensor& lse, const torch::Tensor& sinks);

// The gradient of the sinks [H] given add_sinks' lse and delta = rowsum(dO * O), both [B, H, T]:
// the sink column's probability is exp(sink - lse) and its value 0, so
// d sink_h = -sum over the rows of head h of exp(sink_h - lse) * delta. In the sinks' dtype.
torch::Tensor sink_gradient(const torch::Tensor& sinks, const torch::Tensor& lse, const torch::Tensor& delta);

}  // namespace xtrain::model
