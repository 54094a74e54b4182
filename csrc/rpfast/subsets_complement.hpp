// Counting pruned k-subsets of dense graphs through their complement: the few vertex sets
// that decide the count, found by searches whose size follows the non-edges, not the kept
// subsets. Python (rpfast/ops/subsets.py) turns the histograms below into exact counts.
//
// G is one graph (LocalGraph, n vertices); nonadj(v) = the vertices other than v that are
// not adjacent to v (v's neighbours in the complement H). Both searches keep bitsets of n
// bits, one row per vertex (n * ceil(n / 64) words, checked against the memory budget by
// the caller).
//
// Independent sets (mode kIndependentSets), for "edgeless" and "isolated": every non-empty
// independent set I of G (a clique of H) with |I| <= j_hi and |I| + c(I) >= j_lo, where
// c(I) = |common non-neighbours of I| = |AND over v in I of nonadj(v)|, counted by
// (|I|, c(I)). Then, for j_lo <= j <= j_hi,
//   independent j-sets = sum over |I| = j of the counts;
//   j-sets without an isolated vertex = C(n, j) + sum over I of (-1)^|I| C(c(I), j - |I|)
// (inclusion-exclusion over the set I of vertices isolated in S: they must be independent,
// and the rest of S lies in their common non-neighbourhood). A set I with |I| + c(I) < j_lo
// and all its extensions (which only lose common non-neighbours) contribute nothing.
//
// Connected sets (mode kConnectedSets), for "disconnected": a disconnected k-set S splits
// into the component X of G[S] holding min(S) and a non-empty rest inside
// W(X) = {w > min X, w not in X, w adjacent to no vertex of X}, and each such (X, rest) is
// one disconnected S. So the disconnected k-sets number sum over connected X (|X| < k,
// grown by ESU from its smallest vertex) of C(|W(X)|, k - |X|), counted by (|X|, |W(X)|).
// W only shrinks as X grows, and every vertex of a larger X' with w in W(X') is a
// neighbour of w in H, so |X'| <= deg_H(w): a subtree is cut unless some X' of size
// max(|X| + 1, k - |W(X)|) .. min(k - 1, max deg_H over W(X)) could still contribute.
//
// The searches count their steps (one per set examined, plus one per 64 words or list
// entries they go through for it) and stop once step_limit is passed; they run on one
// thread, so where they stop depends on the graph alone.
#pragma once
#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "rpfast/graph.hpp"
#include "rpfast/interrupt.hpp"

namespace rpfast {

enum class ComplementMode : int { kIndependentSets = 0, kConnectedSets = 1 };

struct ComplementHistogram {
  std::unordered_map<uint64_t, uint64_t> counts;  // key size * (n + 1) + other -> sets
  uint64_t steps = 0;
  bool exceeded = false;
};

class ComplementSearch {
 public:
  ComplementSearch(const LocalGraph& g, uint64_t step_limit)
      : g_(g), n_(g.n), words_((g.n + 63) / 64), nonadj_(static_cast<size_t>(g.n) * words_, 0),
        hdeg_(g.n, 0), step_limit_(step_limit) {
    for (int64_t v = 0; v < n_; ++v) {
      uint64_t* row = nonadj_.data() + v * words_;
      for (int64_t w = 0; w < words_; ++w) row[w] = ~uint64_t{0};
      if (n_ % 64) row[words_ - 1] = (uint64_t{1} << (n_ % 64)) - 1;
      clear_bit(row, v);
      for (const int64_t* p = g.begin(v); p != g.end(v); ++p) clear_bit(row, *p);
      hdeg_[v] = n_ - 1 - g.degree(v);
      max_hdeg_ = std::max(max_hdeg_, hdeg_[v]);
    }
  }

  // Independent sets I (non-empty, |I| <= j_hi, |I| + c(I) >= j_lo) by (|I|, c(I)).
  ComplementHistogram independent_sets(int64_t j_lo, int64_t j_hi) {
    result_ = ComplementHistogram{};
    j_lo_ = j_lo;
    j_hi_ = j_hi;
    if (j_hi < 1 || n_ == 0) return std::move(result_);
    std::vector<uint64_t>& all = level(0);
    for (int64_t w = 0; w < words_; ++w) all[w] = ~uint64_t{0};
    if (n_ % 64) all[words_ - 1] = (uint64_t{1} << (n_ % 64)) - 1;
    independent_extend(0, -1);
    return std::move(result_);
  }

  // Connected sets X (|X| < k, W(X) contributing) by (|X|, |W(X)|).
  ComplementHistogram connected_sets(int64_t k) {
    result_ = ComplementHistogram{};
    k_ = k;
    if (k < 2 || n_ < k) return std::move(result_);
    near_.assign(n_, 0);
    for (int64_t root = 0; root < n_ && !result_.exceeded; ++root) {
      std::vector<uint64_t>& W = level(1);
      const uint64_t* row = nonadj_.data() + root * words_;
      for (int64_t w = 0; w < words_; ++w) W[w] = row[w] & above_mask(w, root);
      if (!step()) break;
      const int64_t size_w = popcount(W.data());
      if (size_w == 0) continue;
      if (size_w >= k - 1) record(1, size_w);
      if (!promising(1, W.data(), size_w)) continue;
      root_ = root;
      mark(root, +1);
      std::vector<int64_t> extension;
      for (const int64_t* p = g_.begin(root); p != g_.end(root); ++p)
        if (*p > root) extension.push_back(*p);
      connected_extend(1, std::move(extension));
      mark(root, -1);
    }
    return std::move(result_);
  }

  int64_t max_complement_degree() const { return max_hdeg_; }

 private:
  static void clear_bit(uint64_t* row, int64_t v) { row[v >> 6] &= ~(uint64_t{1} << (v & 63)); }
  static bool test_bit(const uint64_t* row, int64_t v) { return (row[v >> 6] >> (v & 63)) & 1; }

  // The bits of word w that stand for vertices > v.
  static uint64_t above_mask(int64_t w, int64_t v) {
    const int64_t first = v + 1;  // vertices >= first
    if ((w + 1) * 64 <= first) return 0;
    if (w * 64 >= first) return ~uint64_t{0};
    return ~uint64_t{0} << (first - w * 64);
  }

  int64_t popcount(const uint64_t* bits) const {
    int64_t c = 0;
    for (int64_t w = 0; w < words_; ++w) c += __builtin_popcountll(bits[w]);
    return c;
  }

  std::vector<uint64_t>& level(int64_t depth) {
    while (static_cast<int64_t>(levels_.size()) <= depth) levels_.emplace_back(words_);
    return levels_[depth];
  }

  bool step(uint64_t cost = 0) {
    poller_.tick();
    result_.steps += 1 + static_cast<uint64_t>(words_) / 64 + cost / 64;
    if (result_.steps > step_limit_) result_.exceeded = true;
    return !result_.exceeded;
  }

  void record(int64_t size, int64_t other) { ++result_.counts[static_cast<uint64_t>(size * (n_ + 1) + other)]; }

  // I = the vertices chosen at depths 1..depth, last its largest; level(depth) = c(I)'s set.
  void independent_extend(int64_t depth, int64_t last) {
    for (int64_t w = 0; w < words_ && !result_.exceeded; ++w) {
      uint64_t bits = level(depth)[w] & above_mask(w, last);
      while (bits && !result_.exceeded) {
        const int64_t v = w * 64 + __builtin_ctzll(bits);
        bits &= bits - 1;
        if (!step()) return;
        std::vector<uint64_t>& next = level(depth + 1);
        const std::vector<uint64_t>& common = level(depth);
        const uint64_t* row = nonadj_.data() + v * words_;
        for (int64_t x = 0; x < words_; ++x) next[x] = common[x] & row[x];
        const int64_t size = depth + 1, c = popcount(next.data());
        if (size + c < j_lo_) continue;  // neither I + v nor any extension contributes
        record(size, c);
        if (size < j_hi_ && c > 0) independent_extend(depth + 1, v);
      }
    }
  }

  // Could a connected X' extending the current X (size `size`, W(X) = W with size_w bits)
  // still contribute? Needs |X'| in [max(size + 1, k - size_w), min(k - 1, max deg_H over W)].
  bool promising(int64_t size, const uint64_t* W, int64_t size_w) const {
    const int64_t lo = std::max(size + 1, k_ - size_w);
    if (lo > k_ - 1 || lo > max_hdeg_) return false;
    int64_t most = 0;
    for (int64_t w = 0; w < words_ && most < lo; ++w)
      for (uint64_t bits = W[w]; bits && most < lo; bits &= bits - 1)
        most = std::max(most, hdeg_[w * 64 + __builtin_ctzll(bits)]);
    return most >= lo;
  }

  // near_[x] > 0 iff x is in X or adjacent to it (ESU's exclusive neighbourhoods).
  void mark(int64_t w, int delta) {
    near_[w] += delta;
    for (const int64_t* p = g_.begin(w); p != g_.end(w); ++p) near_[*p] += delta;
  }

  // ESU (as in subsets.hpp's ConnectedSearch) over connected X with min root_; level(size)
  // holds W(X).
  void connected_extend(int64_t size, std::vector<int64_t> extension) {
    while (!extension.empty() && !result_.exceeded) {
      const int64_t w = extension.back();
      extension.pop_back();
      if (!step()) return;
      std::vector<uint64_t>& next = level(size + 1);
      const std::vector<uint64_t>& W = level(size);
      const uint64_t* row = nonadj_.data() + w * words_;
      int64_t size_w = 0;
      for (int64_t x = 0; x < words_; ++x) size_w += __builtin_popcountll(next[x] = W[x] & row[x]);
      if (size_w == 0) continue;  // W only shrinks: nothing below contributes
      const int64_t grown = size + 1;
      if (size_w >= k_ - grown) record(grown, size_w);
      if (grown >= k_ - 1 || !promising(grown, next.data(), size_w)) continue;
      if (!step(extension.size() + static_cast<uint64_t>(g_.degree(w)))) return;  // the copy and the scans below
      std::vector<int64_t> next_extension = extension;
      for (const int64_t* p = g_.begin(w); p != g_.end(w); ++p)
        if (*p > root_ && near_[*p] == 0) next_extension.push_back(*p);
      mark(w, +1);
      connected_extend(grown, std::move(next_extension));
      mark(w, -1);
    }
  }

  LocalGraph g_;
  int64_t n_, words_;
  std::vector<uint64_t> nonadj_;
  std::vector<int64_t> hdeg_;
  int64_t max_hdeg_ = 0;
  uint64_t step_limit_;
  std::vector<std::vector<uint64_t>> levels_;
  std::vector<int32_t> near_;
  ComplementHistogram result_;
  int64_t j_lo_ = 0, j_hi_ = 0, k_ = 0, root_ = 0;
  InterruptPoller<> poller_;
};

}  // namespace rpfast
