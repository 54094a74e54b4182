// Validated views of a graph batch's simple undirected CSR for the kernels that search graphs.
#pragma once
#include "bindings/arrays.hpp"
#include "rpfast/subsets_batch.hpp"

namespace rpfast_bindings {

// ptr [B + 1] node offsets; rowptr [N + 1], col [E] the undirected CSR with local
// neighbour ids, strictly increasing per row, without self-loops
// (GraphBatch.undirected_csr()). Throws on anything else, so searches cannot go astray.
inline rpfast::GraphBatchView batch_view(const py::array& ptr, const py::array& rowptr, const py::array& col) {
  const int64_t* p = in_ptr<int64_t>(ptr, "ptr", 1);
  const int64_t* rp = in_ptr<int64_t>(rowptr, "rowptr", 1);
  const int64_t* c = in_ptr<int64_t>(col, "col", 1);
  const int64_t B = ptr.shape(0) - 1;
  if (B < 0 || p[0] != 0) throw std::invalid_argument("ptr must start at 0 and have B + 1 entries");
  for (int64_t b = 0; b < B; ++b)
    if (p[b + 1] < p[b]) throw std::invalid_argument("ptr decreases at graph " + std::to_string(b));
  const int64_t N = p[B];
  expect_dim(rowptr, "rowptr", 0, N + 1);
  if (rp[0] != 0 || rp[N] != col.shape(0)) throw std::invalid_argument("rowptr must span col");
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = p[b + 1] - p[b];
    for (int64_t u = p[b]; u < p[b + 1]; ++u) {
      if (rp[u + 1] < rp[u]) throw std::invalid_argument("rowptr decreases at row " + std::to_string(u));
      for (int64_t e = rp[u]; e < rp[u + 1]; ++e) {
        if (c[e] < 0 || c[e] >= n)
          throw std::out_of_range("col[" + std::to_string(e) + "] = " + std::to_string(c[e]) +
                                  " is not a local vertex of graph " + std::to_string(b));
        if (e > rp[u] && c[e] <= c[e - 1])
          throw std::invalid_argument("neighbour lists must be strictly increasing (row " + std::to_string(u) + ")");
        if (c[e] == u - p[b]) throw std::invalid_argument("self-loop at vertex " + std::to_string(u));
      }
    }
  }
  return rpfast::GraphBatchView{B, p, rp, c};
}

}  // namespace rpfast_bindings
