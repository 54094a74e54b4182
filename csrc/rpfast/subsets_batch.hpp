// Batched drivers for subsets.hpp: one task per (graph, root vertex), run in parallel.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "rpfast/parallel.hpp"

#include "rpfast/subsets.hpp"

namespace rpfast {

// A batch of graphs: ptr [B + 1] node offsets; rowptr [N + 1] and col [E] the undirected
// CSR over all N nodes with *local* neighbour ids (col values in [0, n_b)).
struct GraphBatchView {
  int64_t B;
  const int64_t* ptr;
  const int64_t* rowptr;
  const int64_t* col;

  int64_t total_nodes() const { return ptr[B]; }
  LocalGraph graph(int64_t b) const {
    return LocalGraph{ptr[b + 1] - ptr[b], rowptr + ptr[b], col + rowptr[ptr[b]]};
  }
};

// Calls body(search, root, task) for every (graph, root) task t in [t_begin, t_end) with
// wanted(t), with a SubsetSearch for the task's graph; each thread keeps its search while
// consecutive tasks share a graph. Tasks are dealt out dynamically (their costs differ by
// orders of magnitude). Exceptions (bad_alloc, Ctrl-C) are rethrown after the loop.
template <class Wanted, class Body>
void for_each_task(const GraphBatchView& batch, int64_t k, SubsetMode mode, int64_t t_begin, int64_t t_end,
                   int threads, Wanted&& wanted, Body&& body) {
  std::vector<int64_t> graph_of(static_cast<size_t>(batch.total_nodes()));
  for (int64_t b = 0; b < batch.B; ++b)
    for (int64_t v = batch.ptr[b]; v < batch.ptr[b + 1]; ++v) graph_of[v] = b;
  struct ThreadSearch {
    std::unique_ptr<SubsetSearch> search;
    int64_t graph = -1;
  };
  parallel_items(
      t_end - t_begin, threads, 8, [] { return ThreadSearch{}; },
      [&](ThreadSearch& state, int64_t i) {
        const int64_t t = t_begin + i;
        if (!wanted(t)) return;
        const int64_t b = graph_of[t];
        if (batch.graph(b).n - (t - batch.ptr[b]) < k) return;  // too few vertices after the root
        if (b != state.graph) {
          state.search.reset();
          state.search = std::make_unique<SubsetSearch>(batch.graph(b), k, mode);
          state.graph = b;
        }
        body(*state.search, t - batch.ptr[b], t);
      });
}

// What count_tasks found: counts [N] per task are complete unless `exceeded`, in which
// case counting stopped early because graph `graph` (or the batch total, graph = -1)
// passed its limit.
struct CountResult {
  bool exceeded;
  int64_t graph;
};

// counts[t] = the subsets of task t, stopping as soon as a graph's total passes
// graph_limit or the batch total passes total_limit.
inline CountResult count_tasks(const GraphBatchView& batch, int64_t k, SubsetMode mode, uint64_t graph_limit,
                               uint64_t total_limit, uint64_t* counts, int threads) {
  CountLimits limits{graph_limit, total_limit};
  std::vector<std::atomic<uint64_t>> per_graph(static_cast<size_t>(batch.B));
  for (auto& c : per_graph) c.store(0);
  std::vector<int64_t> graph_of(static_cast<size_t>(batch.total_nodes()));
  for (int64_t b = 0; b < batch.B; ++b)
    for (int64_t v = batch.ptr[b]; v < batch.ptr[b + 1]; ++v) graph_of[v] = b;
  for_each_task(
      batch, k, mode, 0, batch.total_nodes(), threads,
      [&](int64_t t) {
        counts[t] = 0;
        return !limits.exceeded.load(std::memory_order_relaxed);
      },
      [&](SubsetSearch& search, int64_t root, int64_t t) {
        CountSink sink(limits, per_graph[graph_of[t]], graph_of[t]);
        search.count(root, sink);
        counts[t] = sink.count;
      });
  return CountResult{limits.exceeded.load(), limits.exceeded_graph.load()};
}

// offsets [N + 1]: row offsets of each task (prefix sums of count_tasks). Writes the rows
// of tasks [t_begin, t_end) to out, starting at row offsets[t_begin].
inline void fill_tasks(const GraphBatchView& batch, int64_t k, SubsetMode mode, const int64_t* offsets,
                       int64_t t_begin, int64_t t_end, int64_t* out, int threads) {
  for_each_task(
      batch, k, mode, t_begin, t_end, threads, [&](int64_t t) { return offsets[t + 1] > offsets[t]; },
      [&](SubsetSearch& search, int64_t root, int64_t t) {
        search.fill_task(root, offsets[t + 1] - offsets[t], out + (offsets[t] - offsets[t_begin]) * k);
      });
}

// Random access into the enumeration without storing it: pick_ptr [N + 1] groups the
// ascending task-local indices `picks` by task; out [pick_ptr[N], k] gets the rows.
inline void pick_tasks(const GraphBatchView& batch, int64_t k, SubsetMode mode, const int64_t* pick_ptr,
                       const uint64_t* picks, int64_t* out, int threads) {
  for_each_task(
      batch, k, mode, 0, batch.total_nodes(), threads, [&](int64_t t) { return pick_ptr[t + 1] > pick_ptr[t]; },
      [&](SubsetSearch& search, int64_t root, int64_t t) {
        search.pick(root, picks + pick_ptr[t], pick_ptr[t + 1] - pick_ptr[t], out + pick_ptr[t] * k);
      });
}

}  // namespace rpfast
