// Batched drivers for subsets.hpp: one task per (graph, root vertex), run in parallel.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include <omp.h>

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

// Calls body(search, root, task) for every (graph, root) task with a SubsetSearch for the
// task's graph; each thread keeps its search while consecutive tasks share a graph.
// Tasks are dealt out dynamically (their costs differ by orders of magnitude).
// `wanted(t)` says whether task t has work, so idle tasks never build a search.
template <class Wanted, class Body>
void for_each_task(const GraphBatchView& batch, int64_t k, SubsetMode mode, int64_t t_begin, int64_t t_end,
                   int threads, Wanted&& wanted, Body&& body) {
  std::vector<int64_t> graph_of(static_cast<size_t>(batch.total_nodes()));
  for (int64_t b = 0; b < batch.B; ++b)
    for (int64_t v = batch.ptr[b]; v < batch.ptr[b + 1]; ++v) graph_of[v] = b;
#pragma omp parallel num_threads(threads > 0 ? threads : 1)
  {
    std::unique_ptr<SubsetSearch> search;
    int64_t search_graph = -1;
#pragma omp for schedule(dynamic, 8)
    for (int64_t t = t_begin; t < t_end; ++t) {
      if (!wanted(t)) continue;
      const int64_t b = graph_of[t];
      if (b != search_graph) {
        search = std::make_unique<SubsetSearch>(batch.graph(b), k, mode);
        search_graph = b;
      }
      body(*search, t - batch.ptr[b], t);
    }
  }
}

inline void count_tasks(const GraphBatchView& batch, int64_t k, SubsetMode mode, uint64_t* counts,
                        int threads) {
  for_each_task(
      batch, k, mode, 0, batch.total_nodes(), threads, [](int64_t) { return true; },
      [&](SubsetSearch& search, int64_t root, int64_t t) { counts[t] = search.count(root); });
}

// offsets [N + 1]: row offsets of each task (prefix sums of count_tasks). Writes the rows
// of tasks [t_begin, t_end) to out, starting at row offsets[t_begin].
inline void fill_tasks(const GraphBatchView& batch, int64_t k, SubsetMode mode, const int64_t* offsets,
                       int64_t t_begin, int64_t t_end, int64_t* out, int threads) {
  for_each_task(
      batch, k, mode, t_begin, t_end, threads, [&](int64_t t) { return offsets[t + 1] > offsets[t]; },
      [&](SubsetSearch& search, int64_t root, int64_t t) {
        search.fill(root, 0, offsets[t + 1] - offsets[t], nullptr, out + (offsets[t] - offsets[t_begin]) * k);
      });
}

}  // namespace rpfast
