// Poly-canonical orientations: batched DFS/BFS vertex orders (paper Sec. 2.3.1).
//
// For every (graph b, sample p): a search from start[b, p] over the simple undirected
// graph that visits neighbours in increasing tiebreak rank (tiebreak[b, p, v] = rank of
// vertex v; default: the vertex id) and, once a component is exhausted, restarts at the
// lowest-ranked unvisited vertex. order[b, p, i] is the i-th visited vertex (gather
// convention), -1 beyond the graph or after K positions. DFS is the recursive preorder
// (a vertex's next neighbour is taken only after the previous one's subtree); BFS emits
// vertices when discovered. O(n + E) per sample: neighbour lists are bucketed by rank
// instead of sorted.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "rpfast/graph.hpp"
#include "cpu/parallel.hpp"
#include "rpfast/interrupt.hpp"

namespace rpfast {

// Throws unless start[b, p] in [0, n_b) (or -1: that row is all -1) and tiebreak rows
// (n_max entries each, at least the largest graph's size) are permutations of 0..n_b-1
// on their first n_b entries.
inline void check_orientation_inputs(const GraphBatchView& batch, const int64_t* start, const int64_t* tiebreak,
                                     int64_t P, int64_t n_max) {
  if (tiebreak && n_max < batch.max_nodes())
    throw std::invalid_argument("tiebreak must have n_max entries per row");
  std::vector<int64_t> seen(static_cast<size_t>(n_max), -1);
  for (int64_t b = 0; b < batch.B; ++b) {
    const int64_t n = batch.ptr[b + 1] - batch.ptr[b];
    for (int64_t p = 0; p < P; ++p) {
      const int64_t s = start[b * P + p];
      if (s < -1 || s >= n)
        throw std::out_of_range("start[" + std::to_string(b) + ", " + std::to_string(p) + "] = " +
                                std::to_string(s) + " is not a vertex of graph " + std::to_string(b) +
                                " (" + std::to_string(n) + " vertices)");
      if (!tiebreak) continue;
      const int64_t row = b * P + p;
      const int64_t* rank = tiebreak + row * n_max;
      for (int64_t v = 0; v < n; ++v) {
        const int64_t r = rank[v];
        if (r < 0 || r >= n || seen[r] == row)
          throw std::invalid_argument("tiebreak[" + std::to_string(b) + ", " + std::to_string(p) +
                                      "] is not a permutation of 0.." + std::to_string(n - 1) +
                                      " (entry " + std::to_string(v) + " = " + std::to_string(r) + ")");
        seen[r] = row;
      }
    }
  }
}

class Traversal {
 public:
  explicit Traversal(int64_t n_max) : visited_(n_max, 0), by_rank_(n_max), cursor_(n_max) {}

  // Writes K entries of one (graph, sample) order into out.
  void run(const LocalGraph& g, int64_t start, const int64_t* rank, bool depth_first, int64_t K, int64_t* out) {
    int64_t found = 0;
    if (start >= 0) {
      prepare(g, rank);
      ++round_;
      int64_t next_restart = 0;  // rank of the next restart candidate
      int64_t source = start;
      while (found < K) {
        if (depth_first)
          dfs(source, K, out, found);
        else
          bfs(source, K, out, found);
        if (found >= K) break;
        while (next_restart < g.n && visited_[by_rank(next_restart)] == round_) ++next_restart;
        if (next_restart == g.n) break;
        source = by_rank(next_restart);
      }
    }
    for (int64_t i = found; i < K; ++i) out[i] = -1;
  }

 private:
  // The vertex of rank r (identity ranks need no table, so a short k-ary order costs O(k)).
  int64_t by_rank(int64_t r) const { return ranked_ ? by_rank_[r] : r; }

  // Neighbour lists in rank order: identity ranks reuse the sorted CSR; otherwise bucket
  // every vertex u, taken in rank order, into the lists of its neighbours.
  void prepare(const LocalGraph& g, const int64_t* rank) {
    g_ = g;
    ranked_ = rank != nullptr;
    if (!rank) {
      lists_ = nullptr;
      return;
    }
    for (int64_t v = 0; v < g.n; ++v) by_rank_[rank[v]] = v;
    const int64_t E = g.rowptr[g.n] - g.rowptr[0];
    sorted_.resize(static_cast<size_t>(E));
    for (int64_t v = 0; v < g.n; ++v) cursor_[v] = g.rowptr[v] - g.rowptr[0];
    for (int64_t r = 0; r < g.n; ++r) {
      const int64_t u = by_rank_[r];
      for (const int64_t* p = g.begin(u); p != g.end(u); ++p) sorted_[cursor_[*p]++] = u;
    }
    lists_ = sorted_.data();
  }

  const int64_t* neighbours(int64_t u) const { return lists_ ? lists_ + (g_.rowptr[u] - g_.rowptr[0]) : g_.begin(u); }
  int64_t degree(int64_t u) const { return g_.rowptr[u + 1] - g_.rowptr[u]; }

  void dfs(int64_t source, int64_t K, int64_t* out, int64_t& found) {
    visited_[source] = round_;
    out[found++] = source;
    stack_.assign(1, {source, 0});
    while (!stack_.empty() && found < K) {
      auto& [u, next] = stack_.back();
      const int64_t* nb = neighbours(u);
      const int64_t deg = degree(u);
      while (next < deg && visited_[nb[next]] == round_) ++next;
      if (next == deg) {
        stack_.pop_back();
        continue;
      }
      const int64_t w = nb[next++];
      visited_[w] = round_;
      out[found++] = w;
      stack_.push_back({w, 0});
    }
  }

  void bfs(int64_t source, int64_t K, int64_t* out, int64_t& found) {
    visited_[source] = round_;
    const int64_t head_start = found;
    out[found++] = source;
    for (int64_t head = head_start; head < found && found < K; ++head) {
      const int64_t u = out[head];
      const int64_t* nb = neighbours(u);
      for (int64_t i = 0; i < degree(u) && found < K; ++i)
        if (visited_[nb[i]] != round_) {
          visited_[nb[i]] = round_;
          out[found++] = nb[i];
        }
    }
  }

  LocalGraph g_{0, nullptr, nullptr};
  std::vector<uint64_t> visited_;
  uint64_t round_ = 0;
  std::vector<int64_t> by_rank_, cursor_, sorted_;
  const int64_t* lists_ = nullptr;
  bool ranked_ = false;
  std::vector<std::pair<int64_t, int64_t>> stack_;
};

// out [B, P, K]; start [B, P]; tiebreak [B, P, n_max] or nullptr. Inputs must be checked.
inline void traversal_orders(const GraphBatchView& batch, const int64_t* start, const int64_t* tiebreak, int64_t P,
                             int64_t n_max, int64_t K, bool depth_first, int64_t* out, int threads) {
  const int64_t rows = batch.B * P;
  const int64_t E = batch.rowptr[batch.total_nodes()];
  const int64_t cost = K + 1 + (tiebreak && rows ? (E * P + rows - 1) / rows : 0);  // per row, tie-break lists included
  parallel_items(
      rows, threads, 16, cost, [&] { return Traversal(n_max); },
      [&](Traversal& traversal, int64_t row) {
        poll_interrupt();
        traversal.run(batch.graph(row / P), start[row], tiebreak ? tiebreak + row * n_max : nullptr, depth_first, K,
                      out + row * K);
      });
}

}  // namespace rpfast
