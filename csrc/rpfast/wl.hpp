// 1-WL colour refinement to the stable partition, with canonical colour names.
//
// Each round gives vertex v the signature (colour(v), sorted multiset of neighbour
// colours) and renames signatures 0, 1, ... in sorted order. Because the names depend
// only on signatures, never on vertex ids, isomorphic graphs get the same colours on
// corresponding vertices. Refinement stops when a round no longer splits a class.
#pragma once
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include <omp.h>

#include "rpfast/subsets_batch.hpp"

namespace rpfast {

class WLRefiner {
 public:
  // colours [n]: initial colours in, stable canonical colours out. Returns the rounds run.
  int64_t refine(const LocalGraph& g, int64_t* colours) {
    const int64_t n = g.n;
    order_.resize(n);
    next_.resize(n);
    rename(g, colours, /*with_neighbours=*/false);  // canonical names for the initial colours
    int64_t classes = distinct_;
    int64_t rounds = 0;
    while (true) {
      rename(g, colours, /*with_neighbours=*/true);
      ++rounds;
      if (distinct_ == classes) break;  // no class split: stable
      classes = distinct_;
    }
    return rounds;
  }

 private:
  // Sorts vertices by signature and writes the rank of each distinct signature as its colour.
  void rename(const LocalGraph& g, int64_t* colours, bool with_neighbours) {
    const int64_t n = g.n;
    offset_.assign(n + 1, 0);
    for (int64_t v = 0; v < n; ++v) offset_[v + 1] = offset_[v] + 1 + (with_neighbours ? g.end(v) - g.begin(v) : 0);
    signature_.resize(offset_[n]);
    for (int64_t v = 0; v < n; ++v) {
      int64_t* s = signature_.data() + offset_[v];
      s[0] = colours[v];
      if (!with_neighbours) continue;
      int64_t i = 1;
      for (const int64_t* p = g.begin(v); p != g.end(v); ++p) s[i++] = colours[*p];
      std::sort(s + 1, s + i);
    }
    auto less = [&](int64_t a, int64_t b) {
      const int64_t* sa = signature_.data() + offset_[a];
      const int64_t* sb = signature_.data() + offset_[b];
      const int64_t la = offset_[a + 1] - offset_[a], lb = offset_[b + 1] - offset_[b];
      if (sa[0] != sb[0]) return sa[0] < sb[0];
      if (la != lb) return la < lb;
      return std::lexicographical_compare(sa + 1, sa + la, sb + 1, sb + lb);
    };
    std::iota(order_.begin(), order_.end(), 0);
    std::sort(order_.begin(), order_.end(), less);
    distinct_ = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (i > 0 && less(order_[i - 1], order_[i])) ++distinct_;
      next_[order_[i]] = distinct_;
    }
    if (n > 0) ++distinct_;
    std::copy(next_.begin(), next_.end(), colours);
  }

  std::vector<int64_t> order_, next_, offset_, signature_;
  int64_t distinct_ = 0;
};

// colours [N]: initial colours in (any integers), stable canonical colours out (per graph
// 0..c_b-1).
inline void wl_refine(const GraphBatchView& batch, int64_t* colours, int threads) {
#pragma omp parallel num_threads(threads > 0 ? threads : 1)
  {
    WLRefiner refiner;
#pragma omp for schedule(dynamic, 4)
    for (int64_t b = 0; b < batch.B; ++b) refiner.refine(batch.graph(b), colours + batch.ptr[b]);
  }
}

}  // namespace rpfast
