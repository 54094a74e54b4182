// 1-WL colour refinement to the stable (coarsest equitable) partition, with canonical
// colour names, in O((n + E) log n) per graph.
//
// The partition is ordered: cells are contiguous ranges of one array of vertices, named
// by their first position. Initially cells hold the vertices of equal input colour, in
// increasing colour. A splitter cell S gives every vertex w the count |N(w) ∩ S|; each
// cell whose members disagree on that count splits into fragments ordered by count (the
// untouched, count-0 part first). Every new fragment joins the splitter queue, except the
// first largest one when its parent was not queued (Hopcroft's "all but the largest"
// rule; Berkholz, Bonsma & Grohe 2017), so each vertex is in O(log n) processed splitters.
// Every decision depends only on cell positions and counts, never on vertex ids, so
// isomorphic graphs get the same colours on corresponding vertices; the colour of a vertex
// is the rank of its cell in the final order (per graph 0..c-1).
#pragma once
#include <algorithm>
#include <cstdint>
#include <deque>
#include <numeric>
#include <vector>

#include "rpfast/graph.hpp"
#include "cpu/parallel.hpp"
#include "rpfast/interrupt.hpp"

namespace rpfast {

class WLRefiner {
 public:
  explicit WLRefiner(int64_t n_max)
      : elems_(n_max), pos_(n_max), cell_of_(n_max), cell_end_(n_max), count_(n_max, 0), queued_(n_max, 0) {}

  // colours [n]: initial colours in, stable canonical colours out.
  void refine(const LocalGraph& g, int64_t* colours) {
    const int64_t n = g.n;
    if (n == 0) return;
    initial_cells(n, colours);
    while (!queue_.empty()) {
      poller_.tick();
      const int64_t s = queue_.front();
      queue_.pop_front();
      queued_[s] = 0;
      split_by(g, s);
    }
    int64_t colour = -1, previous = -1;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = elems_[i];
      if (cell_of_[v] != previous) {
        previous = cell_of_[v];
        ++colour;
      }
      colours[v] = colour;
    }
  }

 private:
  void initial_cells(int64_t n, const int64_t* colours) {
    std::iota(elems_.begin(), elems_.begin() + n, 0);
    std::stable_sort(elems_.begin(), elems_.begin() + n,
                     [&](int64_t a, int64_t b) { return colours[a] < colours[b]; });
    queue_.clear();
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = elems_[i];
      pos_[v] = i;
      const bool starts = i == 0 || colours[elems_[i - 1]] != colours[v];
      cell_of_[v] = starts ? i : cell_of_[elems_[i - 1]];
      if (starts) {
        queue_.push_back(i);
        queued_[i] = 1;
      }
      cell_end_[cell_of_[v]] = i + 1;
    }
  }

  void enqueue(int64_t start) {
    if (!queued_[start]) {
      queued_[start] = 1;
      queue_.push_back(start);
    }
  }

  // Refines every cell against the splitter cell starting at s.
  void split_by(const LocalGraph& g, int64_t s) {
    splitter_.assign(elems_.begin() + s, elems_.begin() + cell_end_[s]);
    touched_.clear();
    for (int64_t v : splitter_)
      for (const int64_t* p = g.begin(v); p != g.end(v); ++p)
        if (count_[*p]++ == 0) touched_.push_back(*p);
    // Group the touched vertices by cell, cells in partition order (canonical).
    std::sort(touched_.begin(), touched_.end(), [&](int64_t a, int64_t b) {
      return cell_of_[a] != cell_of_[b] ? cell_of_[a] < cell_of_[b] : count_[a] < count_[b];
    });
    for (size_t i = 0; i < touched_.size();) {
      size_t j = i;
      while (j < touched_.size() && cell_of_[touched_[j]] == cell_of_[touched_[i]]) ++j;
      split_cell(cell_of_[touched_[i]], i, j);
      i = j;
    }
    for (int64_t w : touched_) count_[w] = 0;
  }

  // Splits the cell at `start` whose touched members are touched_[i..j) (sorted by count).
  void split_cell(int64_t start, size_t i, size_t j) {
    const int64_t end = cell_end_[start];
    const int64_t touched = static_cast<int64_t>(j - i);
    if (touched == end - start && count_[touched_[i]] == count_[touched_[j - 1]]) return;  // no split
    // Move the touched members to the tail of the range, in count order.
    const int64_t boundary = end - touched;
    for (size_t t = i; t < j; ++t) {
      const int64_t u = touched_[t];
      const int64_t target = boundary + static_cast<int64_t>(t - i);
      const int64_t w = elems_[target];
      std::swap(elems_[pos_[u]], elems_[target]);
      pos_[w] = pos_[u];
      pos_[u] = target;
    }
    // Fragments: [start, boundary) untouched (keeps the cell name), then one per count.
    const bool parent_queued = queued_[start];
    fragments_.clear();
    if (boundary > start) fragments_.push_back(start);
    for (int64_t p = boundary; p < end; ++p)
      if (p == boundary || count_[elems_[p]] != count_[elems_[p - 1]]) fragments_.push_back(p);
    fragments_.push_back(end);
    size_t largest = 0;
    for (size_t f = 0; f + 1 < fragments_.size(); ++f) {
      const int64_t a = fragments_[f], b = fragments_[f + 1];
      cell_end_[a] = b;
      if (a >= boundary)
        for (int64_t p = a; p < b; ++p) cell_of_[elems_[p]] = a;
      if (b - a > fragments_[largest + 1] - fragments_[largest]) largest = f;
    }
    for (size_t f = 0; f + 1 < fragments_.size(); ++f)
      if (parent_queued || f != largest) enqueue(fragments_[f]);
  }

  std::vector<int64_t> elems_, pos_, cell_of_, cell_end_;
  std::vector<int64_t> count_;
  std::vector<char> queued_;
  std::deque<int64_t> queue_;
  std::vector<int64_t> splitter_, touched_, fragments_;
  InterruptPoller<64> poller_;
};

// colours [N]: initial colours in (any integers), stable canonical colours out (per graph
// 0..c_b-1).
inline void wl_refine(const GraphBatchView& batch, int64_t* colours, int threads) {
  const int64_t n_max = batch.max_nodes();
  parallel_items(
      batch.B, threads, 4, Schedule::kLongItem, [&] { return WLRefiner(n_max); },
      [&](WLRefiner& refiner, int64_t b) {
        poll_interrupt();
        refiner.refine(batch.graph(b), colours + batch.ptr[b]);
      });
}

}  // namespace rpfast
