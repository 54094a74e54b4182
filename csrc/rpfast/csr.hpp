// Compressed sparse rows of an edge list, sorted by (row, column), in O(E + N).
//
// Equal to a stable sort of the edges by the key row * N + col (what GraphBatch computed
// with two torch.argsort passes before): a stable counting sort by row, then a stable sort
// of each row's entries by column (insertion sort for the short rows of sparse graphs, a
// merge sort for rows longer than kShortRow). Multi-edges keep their input order.
#pragma once
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace rpfast {

// rows, cols [E] in [0, N) -> rowptr [N + 1], col [E] (the columns in CSR order) and
// order [E] (order[k] = the edge in CSR slot k). Single-threaded: memory-bound and short.
inline void build_csr(const int64_t* rows, const int64_t* cols, int64_t E, int64_t N, int64_t* rowptr,
                      int64_t* col, int64_t* order) {
  for (int64_t e = 0; e < E; ++e)
    if (rows[e] < 0 || rows[e] >= N || cols[e] < 0 || cols[e] >= N)
      throw std::out_of_range("build_csr: edge " + std::to_string(e) + " (" + std::to_string(rows[e]) + " -> " +
                              std::to_string(cols[e]) + ") is outside [0, " + std::to_string(N) + ")");
  std::fill(rowptr, rowptr + N + 1, int64_t{0});
  for (int64_t e = 0; e < E; ++e) ++rowptr[rows[e] + 1];
  for (int64_t i = 0; i < N; ++i) rowptr[i + 1] += rowptr[i];
  std::vector<int64_t> cursor(rowptr, rowptr + N);
  for (int64_t e = 0; e < E; ++e) order[cursor[rows[e]]++] = e;  // stable: edges in input order

  constexpr int64_t kShortRow = 32;
  const auto by_col = [cols](int64_t a, int64_t b) { return cols[a] < cols[b]; };
  for (int64_t i = 0; i < N; ++i) {
    int64_t* begin = order + rowptr[i];
    int64_t* end = order + rowptr[i + 1];
    if (end - begin > kShortRow) {
      std::stable_sort(begin, end, by_col);
      continue;
    }
    for (int64_t* p = begin + 1; p < end; ++p) {  // stable insertion sort: strict comparison
      const int64_t edge = *p;
      int64_t* q = p;
      for (; q > begin && cols[*(q - 1)] > cols[edge]; --q) *q = *(q - 1);
      *q = edge;
    }
  }
  for (int64_t k = 0; k < E; ++k) col[k] = cols[order[k]];
}

}  // namespace rpfast

namespace rpfast {

// Selecting graphs [G] of a batch (GraphBatch.select) without sorting again: the nodes of a
// graph are contiguous, so its rows of the batch's CSR are one contiguous slice, and the new
// CSR is the selected slices in order with node ids shifted.
//
// ptr [B + 1] node offsets, edge_ptr [B + 1] edge offsets in by-graph order, edge_rank [E] the
// position of every edge among its graph's edges (in that order). A selected graph j = graphs[s]
// gets nodes new_ptr[s] + (v - ptr[j]) and edges new_edge_ptr[s] + edge_rank[e].

// Checks graphs against [0, B), writes new_ptr [G + 1] (unless nullptr) and returns the new
// node and edge counts.
inline std::pair<int64_t, int64_t> select_sizes(const int64_t* ptr, const int64_t* edge_ptr, int64_t B,
                                                const int64_t* graphs, int64_t G, int64_t* new_ptr) {
  int64_t nodes = 0, edges = 0;
  if (new_ptr != nullptr) new_ptr[0] = 0;
  for (int64_t s = 0; s < G; ++s) {
    const int64_t j = graphs[s];
    if (j < 0 || j >= B)
      throw std::out_of_range("graph indices must lie in [0, " + std::to_string(B) + "), got graphs[" +
                              std::to_string(s) + "] = " + std::to_string(j));
    nodes += ptr[j + 1] - ptr[j];
    edges += edge_ptr[j + 1] - edge_ptr[j];
    if (new_ptr != nullptr) new_ptr[s + 1] = nodes;
  }
  return {nodes, edges};
}

// The selected slices of one CSR (rowptr [N + 1], col [E], order [E]: CSR slot -> edge id) as
// new_rowptr [N' + 1], new_col [E'], new_order [E'] (new edge ids). With sources != nullptr the
// CSR's rows are the edges' sources, and the new edge list is written too: edge_index [2, E']
// (sources, targets) and old_edge [E'] (the old id of every new edge); nodes [N'] gets the old
// id of every new node.
inline void select_csr(const int64_t* ptr, const int64_t* edge_ptr, const int64_t* edge_rank, const int64_t* graphs,
                       int64_t G, const int64_t* rowptr, const int64_t* col, const int64_t* order,
                       int64_t* new_rowptr, int64_t* new_col, int64_t* new_order, int64_t* sources, int64_t* targets,
                       int64_t* old_edge, int64_t* nodes) {
  int64_t node_base = 0, edge_base = 0, slot = 0;
  new_rowptr[0] = 0;
  for (int64_t s = 0; s < G; ++s) {
    const int64_t j = graphs[s];
    const int64_t first = ptr[j], shift = node_base - first;
    for (int64_t v = first; v < ptr[j + 1]; ++v) {
      const int64_t row = v + shift;
      if (nodes != nullptr) nodes[row] = v;
      for (int64_t k = rowptr[v]; k < rowptr[v + 1]; ++k, ++slot) {
        const int64_t e = order[k];
        const int64_t id = edge_base + edge_rank[e];
        new_col[slot] = col[k] + shift;
        new_order[slot] = id;
        if (sources != nullptr) {
          sources[id] = row;
          targets[id] = col[k] + shift;
          old_edge[id] = e;
        }
      }
      new_rowptr[row + 1] = slot;
    }
    node_base += ptr[j + 1] - first;
    edge_base += edge_ptr[j + 1] - edge_ptr[j];
  }
}

}  // namespace rpfast
