// Random connected k-subsets grown by BFS or DFS from a random start vertex (k-ary RP
// with pi-SGD, paper Sec. 2.3.3), batched over graphs and samples.
//
// For each (graph b, sample s) with its own counter-based stream: the start vertex is
// uniform over the vertices whose connected component has at least k vertices; the
// search visits neighbours in a fresh random order and stops after k vertices; the row is
// the visiting order. Rows of graphs without such a component are all -1.
#pragma once
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "rpfast/graph.hpp"
#include "rpfast/interrupt.hpp"
#include "cpu/parallel.hpp"
#include "rpfast/random.hpp"

namespace rpfast {

// The connected component of every vertex of g (BFS) into comp [n]: components are
// numbered 0, 1, ... in the order of their smallest vertex. Returns their sizes.
inline std::vector<int64_t> component_labels(const LocalGraph& g, int64_t* comp, std::vector<int64_t>& queue) {
  std::fill(comp, comp + g.n, -1);
  std::vector<int64_t> sizes;
  for (int64_t s = 0; s < g.n; ++s) {
    if (comp[s] >= 0) continue;
    const int64_t id = static_cast<int64_t>(sizes.size());
    queue.assign(1, s);
    comp[s] = id;
    for (size_t head = 0; head < queue.size(); ++head)
      for (const int64_t* p = g.begin(queue[head]); p != g.end(queue[head]); ++p)
        if (comp[*p] < 0) {
          comp[*p] = id;
          queue.push_back(*p);
        }
    sizes.push_back(static_cast<int64_t>(queue.size()));
  }
  return sizes;
}

// component size of every vertex of g (BFS), written to size_of[n].
inline void component_sizes(const LocalGraph& g, std::vector<int64_t>& size_of, std::vector<int64_t>& queue) {
  std::vector<int64_t> comp(g.n);
  const std::vector<int64_t> sizes = component_labels(g, comp.data(), queue);
  size_of.resize(g.n);
  for (int64_t v = 0; v < g.n; ++v) size_of[v] = sizes[comp[v]];
}

// comp [N]: every vertex's component within its graph (component_labels), graphs in parallel.
inline void component_labels_batch(const GraphBatchView& batch, int64_t* comp, int threads) {
  parallel_items(
      batch.B, threads, 4, Schedule::kLongItem, [] { return std::vector<int64_t>(); },
      [&](std::vector<int64_t>& queue, int64_t b) {
        poll_interrupt();
        component_labels(batch.graph(b), comp + batch.ptr[b], queue);
      });
}

class GrowSampler {
 public:
  GrowSampler(const LocalGraph& g, int64_t k) : g_(g), k_(k), stamp_(g.n, 0), nbrs_(g.col, g.col + (g.rowptr[g.n] - g.rowptr[0])) {
    std::vector<int64_t> size_of, queue;
    component_sizes(g, size_of, queue);
    for (int64_t v = 0; v < g.n; ++v)
      if (size_of[v] >= k) eligible_.push_back(v);
  }

  // Writes k vertices in visiting order (or k times -1) to out.
  void sample(StreamRng& rng, bool depth_first, int64_t* out) {
    if (eligible_.empty() || k_ < 1) {
      for (int64_t i = 0; i < k_; ++i) out[i] = -1;
      return;
    }
    ++round_;
    const int64_t start = eligible_[rng.below(eligible_.size())];
    int64_t found = 0;
    visit(start, rng, out, found);
    if (depth_first) {
      stack_.assign(1, {start, 0});
      while (found < k_ && !stack_.empty()) {
        auto& top = stack_.back();
        const int64_t deg = g_.rowptr[top.first + 1] - g_.rowptr[top.first];
        if (top.second == deg) {
          stack_.pop_back();
          continue;
        }
        const int64_t w = nbrs_[offset(top.first) + top.second++];
        if (stamp_[w] == round_) continue;
        visit(w, rng, out, found);
        stack_.push_back({w, 0});
      }
    } else {
      for (int64_t head = 0; head < found && found < k_; ++head) {
        const int64_t u = out[head];
        for (int64_t e = 0; e < g_.rowptr[u + 1] - g_.rowptr[u] && found < k_; ++e) {
          const int64_t w = nbrs_[offset(u) + e];
          if (stamp_[w] != round_) visit(w, rng, out, found);
        }
      }
    }
  }

 private:
  int64_t offset(int64_t u) const { return g_.rowptr[u] - g_.rowptr[0]; }

  // Marks u visited, records it, and shuffles its neighbour list for this round.
  void visit(int64_t u, StreamRng& rng, int64_t* out, int64_t& found) {
    stamp_[u] = round_;
    out[found++] = u;
    int64_t* list = nbrs_.data() + offset(u);
    const int64_t deg = g_.rowptr[u + 1] - g_.rowptr[u];
    for (int64_t i = deg - 1; i > 0; --i) std::swap(list[i], list[rng.below(static_cast<uint64_t>(i + 1))]);
  }

  LocalGraph g_;
  int64_t k_;
  std::vector<int64_t> eligible_;
  std::vector<uint64_t> stamp_;
  uint64_t round_ = 0;
  std::vector<int64_t> nbrs_;  // the graph's neighbour lists, reshuffled per visit
  std::vector<std::pair<int64_t, int64_t>> stack_;
};

// out [B, S, k]. Stream of (b, s) = b * S + s, so results do not depend on threads.
inline void sample_grown_subsets(const GraphBatchView& batch, int64_t k, int64_t S, bool depth_first,
                                 uint64_t seed, int64_t* out, int threads) {
  parallel_items(
      batch.B, threads, 4, Schedule::kLongItem, [] { return 0; },
      [&](int, int64_t b) {
        poll_interrupt();
        GrowSampler sampler(batch.graph(b), k);
        for (int64_t s = 0; s < S; ++s) {
          if ((s & 1023) == 1023) poll_interrupt();
          StreamRng rng(seed, static_cast<uint64_t>(b * S + s));
          sampler.sample(rng, depth_first, out + (b * S + s) * k);
        }
      });
}

}  // namespace rpfast
