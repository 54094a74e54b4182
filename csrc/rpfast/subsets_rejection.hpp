// Uniform sampling of kept k-subsets by rejection: draw a uniform k-subset (partial
// Fisher-Yates), keep it if the prune mode keeps it, else draw again. Every kept subset is
// equally likely, whatever the fraction kept; the expected number of draws per sample is
// C(n, k) / kept, so rpfast/ops/subsets.py uses this where most subsets are kept.
//
// Sample s of a call draws from its own counter-based stream (seed, s), so the rows depend
// on the seed alone, never on the thread count. The work of all samples is bounded by
// work_limit, a draw costing 1 plus one per 64 vertices drawn or neighbour-list entries
// tested: the total (of a complete run) either stays within it, or the run stops and
// reports it exceeded; which of the two depends on the seed and the graph only.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include "rpfast/graph.hpp"
#include "rpfast/interrupt.hpp"
#include "cpu/parallel.hpp"
#include "rpfast/random.hpp"
#include "rpfast/subsets.hpp"

namespace rpfast {

// Does `prune` keep the subset chosen [k] (distinct vertices of g)? Scratch: stamp [n]
// (marks the subset with a fresh round) and queue [k].
class KeepTest {
 public:
  explicit KeepTest(const LocalGraph& g) : g_(g), stamp_(g.n, 0) {}

  // Neighbour-list entries tested so far.
  uint64_t scanned = 0;

  bool keeps(const int64_t* chosen, int64_t k, Prune prune) {
    if (prune == Prune::kNone) return true;
    ++round_;
    for (int64_t i = 0; i < k; ++i) stamp_[chosen[i]] = round_;
    auto has_inside_neighbour = [&](int64_t u) {
      for (const int64_t* p = g_.begin(u); p != g_.end(u); ++p)
        if (stamp_[*p] == round_) {
          scanned += static_cast<uint64_t>(p - g_.begin(u)) + 1;
          return true;
        }
      scanned += static_cast<uint64_t>(g_.degree(u));
      return false;
    };
    if (prune == Prune::kEdgeless) {
      for (int64_t i = 0; i < k; ++i)
        if (has_inside_neighbour(chosen[i])) return true;
      return false;
    }
    if (prune == Prune::kIsolated) {
      for (int64_t i = 0; i < k; ++i)
        if (!has_inside_neighbour(chosen[i])) return false;
      return true;
    }
    // kDisconnected: a search from chosen[0] inside the subset reaches all k vertices.
    const uint64_t reached = ++round_;  // a second mark: in the subset and reached
    queue_.assign(1, chosen[0]);
    stamp_[chosen[0]] = reached;
    for (size_t head = 0; head < queue_.size(); ++head) {
      scanned += static_cast<uint64_t>(g_.degree(queue_[head]));
      for (const int64_t* p = g_.begin(queue_[head]); p != g_.end(queue_[head]); ++p)
        if (stamp_[*p] == reached - 1) {
          stamp_[*p] = reached;
          queue_.push_back(*p);
        }
    }
    return static_cast<int64_t>(queue_.size()) == k;
  }

 private:
  LocalGraph g_;
  std::vector<uint64_t> stamp_;
  uint64_t round_ = 0;
  std::vector<int64_t> queue_;
};

struct RejectionResult {
  uint64_t work;  // the cost of all draws of all samples (of a complete run)
  bool exceeded;  // the work passed work_limit; out is incomplete
};

// out [S, k]: S uniform kept k-subsets of g (ascending ids), k <= g.n.
inline RejectionResult sample_by_rejection(const LocalGraph& g, int64_t k, Prune prune, uint64_t seed, int64_t S,
                                           uint64_t work_limit, int64_t* out, int threads) {
  // Partial Fisher-Yates over a pool that is the identity between draws (each draw undoes
  // its swaps), or, for large graphs, over SparseSwaps (the same draws in O(k) memory).
  constexpr int64_t kDensePoolMax = int64_t{1} << 20;
  const bool dense = g.n <= kDensePoolMax;
  struct State {
    std::vector<int64_t> pool, swapped;
    SparseSwaps sparse;
    KeepTest test;
  };
  constexpr uint64_t kFlushEvery = 256;
  std::atomic<uint64_t> total{0};
  std::atomic<bool> exceeded{false};
  auto publish = [&](uint64_t work) {
    if (total.fetch_add(work, std::memory_order_relaxed) + work > work_limit) exceeded.store(true);
  };
  parallel_items(
      S, threads, 1, Schedule::kLongItem,
      [&] {
        State state{std::vector<int64_t>(dense ? g.n : 0), std::vector<int64_t>(k), SparseSwaps(), KeepTest(g)};
        for (int64_t v = 0; v < static_cast<int64_t>(state.pool.size()); ++v) state.pool[v] = v;
        return state;
      },
      [&](State& state, int64_t s) {
        poll_interrupt();
        StreamRng rng(seed, static_cast<uint64_t>(s));
        int64_t* row = out + s * k;
        uint64_t pending = 0, draws = 0;
        InterruptPoller<1024> poller;
        while (!exceeded.load(std::memory_order_relaxed)) {
          poller.tick();
          if (dense) {
            for (int64_t i = 0; i < k; ++i) {
              const int64_t j = i + static_cast<int64_t>(rng.below(static_cast<uint64_t>(g.n - i)));
              state.swapped[i] = j;
              std::swap(state.pool[i], state.pool[j]);
            }
            std::copy(state.pool.begin(), state.pool.begin() + k, row);
            for (int64_t i = k - 1; i >= 0; --i) std::swap(state.pool[i], state.pool[state.swapped[i]]);
          } else {
            state.sparse.reset(k);
            for (int64_t i = 0; i < k; ++i) {
              const int64_t j = i + static_cast<int64_t>(rng.below(static_cast<uint64_t>(g.n - i)));
              row[i] = state.sparse.get(j);
              state.sparse.set(j, state.sparse.get(i));
            }
          }
          state.test.scanned = 0;
          const bool kept = state.test.keeps(row, k, prune);
          pending += 1 + (static_cast<uint64_t>(k) + state.test.scanned) / 64;
          if (++draws % kFlushEvery == 0 || kept) {
            publish(pending);
            pending = 0;
          }
          if (kept) {
            std::sort(row, row + k);
            return;
          }
        }
      });
  return RejectionResult{total.load(), exceeded.load()};
}

}  // namespace rpfast
