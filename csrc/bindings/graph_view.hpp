// Buffers to the C++ graph views (rpfast/graph.hpp), checked there.
#pragma once
#include "bindings/arrays.hpp"
#include "bindings/interrupt.hpp"
#include "rpfast/graph.hpp"

namespace rpfast_bindings {

// ptr [B + 1], rowptr [N + 1], col [E] (GraphBatch.undirected_csr()) as a checked view;
// the arrays must outlive it.
inline rpfast::GraphBatchView batch_view(const Array& ptr, const Array& rowptr, const Array& col) {
  const int64_t* p = in_ptr<int64_t>(ptr, "ptr", 1);
  const int64_t* rp = in_ptr<int64_t>(rowptr, "rowptr", 1);
  const int64_t* c = in_ptr<int64_t>(col, "col", 1);
  return rpfast::checked_batch_view(p, ptr.shape(0), rp, rowptr.shape(0), c, col.shape(0));
}

// ptr [B + 1] node offsets of B segments over N rows, checked (starts at 0, ends at N,
// never decreases); the array must outlive the pointer.
inline const int64_t* checked_ptr(const Array& ptr, int64_t N, int64_t* B) {
  const int64_t* p = in_ptr<int64_t>(ptr, "ptr", 1);
  *B = ptr.shape(0) - 1;
  if (*B < 0) throw std::invalid_argument("ptr must have B + 1 >= 1 entries");
  rpfast::check_ptr(p, *B, N);
  return p;
}

// rowptr [N + 1] and col [E] of a CSR over N nodes, checked (monotone offsets, columns in
// range); returns rowptr's pointer and sets *cl to col's. The arrays must outlive them.
inline const int64_t* checked_csr(const Array& rowptr, const Array& col, int64_t N, const int64_t** cl) {
  const int64_t* rp = in_ptr<int64_t>(rowptr, "rowptr", 1);
  *cl = in_ptr<int64_t>(col, "col", 1);
  expect_dim(rowptr, "rowptr", 0, N + 1);
  run_kernel([&] { rpfast::check_csr(rp, *cl, N, col.shape(0), "graph CSR"); });
  return rp;
}

}  // namespace rpfast_bindings
