// The C++ graph views and every check of CSR / ptr offset arrays.
//
// A graph batch follows PyTorch Geometric: ptr [B + 1] node offsets of the B graphs, and
// the simple undirected graph as a CSR over all N = ptr[B] nodes, rowptr [N + 1] and
// col [E], with *local* neighbour ids (col values of graph b in [0, n_b)), each row
// strictly increasing and without self-loops (GraphBatch.undirected_csr()).
//
// Views only point into arrays owned elsewhere. The checks below throw standard
// exceptions on anything else, so kernels that trust a checked view cannot go astray;
// every binding that turns buffers into a view calls them first.
#pragma once
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace rpfast {

// One graph with local vertex ids: rowptr [n + 1] offsets into col (may start at a
// non-zero base), col the neighbours, ascending.
struct LocalGraph {
  int64_t n;
  const int64_t* rowptr;
  const int64_t* col;

  const int64_t* begin(int64_t u) const { return col + (rowptr[u] - rowptr[0]); }
  const int64_t* end(int64_t u) const { return col + (rowptr[u + 1] - rowptr[0]); }
  int64_t degree(int64_t u) const { return rowptr[u + 1] - rowptr[u]; }
  int64_t num_entries() const { return rowptr[n] - rowptr[0]; }
  int64_t max_neighbour(int64_t u) const { return begin(u) == end(u) ? -1 : *(end(u) - 1); }
  bool adjacent(int64_t u, int64_t w) const { return std::binary_search(begin(u), end(u), w); }
};

// A batch of graphs: ptr [B + 1] node offsets; rowptr [N + 1] and col [E] the undirected
// CSR over all N nodes with local neighbour ids (see the top of this file).
struct GraphBatchView {
  int64_t B;
  const int64_t* ptr;
  const int64_t* rowptr;
  const int64_t* col;

  int64_t total_nodes() const { return ptr[B]; }
  int64_t num_entries() const { return rowptr[total_nodes()]; }
  int64_t num_nodes(int64_t b) const { return ptr[b + 1] - ptr[b]; }
  int64_t max_nodes() const {
    int64_t n_max = 0;
    for (int64_t b = 0; b < B; ++b) n_max = std::max(n_max, num_nodes(b));
    return n_max;
  }
  LocalGraph graph(int64_t b) const { return LocalGraph{num_nodes(b), rowptr + ptr[b], col + rowptr[ptr[b]]}; }
};

// ------------------------------------------------------------------ checks
// Throws unless an array `name` has `expected` entries.
inline void check_length(const char* name, int64_t length, int64_t expected) {
  if (length != expected)
    throw std::invalid_argument(std::string(name) + ": dimension 0 is " + std::to_string(length) + ", expected " +
                                std::to_string(expected));
}

// ptr [B + 1] node offsets of a segment layout over N rows: starts at 0, ends at N, never
// decreases.
inline void check_ptr(const int64_t* ptr, int64_t B, int64_t N) {
  if (ptr[0] != 0 || ptr[B] != N) throw std::invalid_argument("ptr must start at 0 and end at N = " + std::to_string(N));
  for (int64_t b = 0; b < B; ++b)
    if (ptr[b + 1] < ptr[b]) throw std::invalid_argument("ptr decreases at graph " + std::to_string(b));
}

// A CSR of N rows over E entries: rowptr [N + 1] starts at 0, ends at E, never decreases,
// and every col is in [0, N). `name` prefixes the messages.
inline void check_csr(const int64_t* rowptr, const int64_t* col, int64_t N, int64_t E, const char* name) {
  if (rowptr[0] != 0 || rowptr[N] != E)
    throw std::invalid_argument(std::string(name) + ": rowptr must start at 0 and end at E = " + std::to_string(E) +
                                ", got " + std::to_string(rowptr[0]) + " .. " + std::to_string(rowptr[N]));
  for (int64_t i = 0; i < N; ++i)
    if (rowptr[i + 1] < rowptr[i])
      throw std::invalid_argument(std::string(name) + ": rowptr decreases at row " + std::to_string(i));
  for (int64_t k = 0; k < E; ++k)
    if (col[k] < 0 || col[k] >= N)
      throw std::out_of_range(std::string(name) + ": col[" + std::to_string(k) + "] = " + std::to_string(col[k]) +
                              " is outside [0, " + std::to_string(N) + ")");
}

// Per-task offsets `name` with `length` entries over N tasks: [N + 1] entries, starting
// at 0, never decreasing.
inline void check_offsets(const int64_t* offsets, int64_t length, int64_t N, const char* name) {
  check_length(name, length, N + 1);
  if (offsets[0] != 0) throw std::invalid_argument(std::string(name) + " must start at 0");
  for (int64_t t = 0; t < N; ++t)
    if (offsets[t + 1] < offsets[t])
      throw std::invalid_argument(std::string(name) + " decreases at task " + std::to_string(t));
}

// The view of ptr [ptr_len], rowptr [rowptr_len] and col [col_len] after checking that
// they form a batch of simple undirected graphs as described at the top of this file.
inline GraphBatchView checked_batch_view(const int64_t* ptr, int64_t ptr_len, const int64_t* rowptr,
                                         int64_t rowptr_len, const int64_t* col, int64_t col_len) {
  const int64_t B = ptr_len - 1;
  if (B < 0 || ptr[0] != 0) throw std::invalid_argument("ptr must start at 0 and have B + 1 entries");
  for (int64_t b = 0; b < B; ++b)
    if (ptr[b + 1] < ptr[b]) throw std::invalid_argument("ptr decreases at graph " + std::to_string(b));
  const int64_t N = ptr[B];
  check_length("rowptr", rowptr_len, N + 1);
  if (rowptr[0] != 0 || rowptr[N] != col_len) throw std::invalid_argument("rowptr must span col");
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = ptr[b + 1] - ptr[b];
    for (int64_t u = ptr[b]; u < ptr[b + 1]; ++u) {
      if (rowptr[u + 1] < rowptr[u]) throw std::invalid_argument("rowptr decreases at row " + std::to_string(u));
      for (int64_t e = rowptr[u]; e < rowptr[u + 1]; ++e) {
        if (col[e] < 0 || col[e] >= n)
          throw std::out_of_range("col[" + std::to_string(e) + "] = " + std::to_string(col[e]) +
                                  " is not a local vertex of graph " + std::to_string(b));
        if (e > rowptr[u] && col[e] <= col[e - 1])
          throw std::invalid_argument("neighbour lists must be strictly increasing (row " + std::to_string(u) + ")");
        if (col[e] == u - ptr[b]) throw std::invalid_argument("self-loop at vertex " + std::to_string(u));
      }
    }
  }
  return GraphBatchView{B, ptr, rowptr, col};
}

}  // namespace rpfast
